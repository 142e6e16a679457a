// Command guesttoken is the host operator's token tool for the guest API
// (docs/protocol.md §9): make an external issuer key pair, print its public key for the
// sys-config, and mint short-lived tokens for given scopes.
package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rayvast/rayvast/internal/guestauth"
)

const usage = `usage: guesttoken keygen --key FILE
       guesttoken pubkey --key FILE
       guesttoken mint   --key FILE --iss NAME --aud APPID --scope "SCOPE ..." [--ttl 1h]

Tokens for a rayvast node's guest API, signed by an external issuer the host
names in its sys-config.

  keygen   make an Ed25519 issuer key, write it to FILE (0600, PKCS#8 PEM;
           refuses to overwrite) and print its hex public key
  pubkey   print the hex public key of FILE
  mint     print a token: iss NAME (the issuer's name in the sys-config),
           aud APPID (the node's app id), the scopes (space or comma separated),
           valid from now for --ttl (default and maximum 1h)

Scopes: guest:version guest:health guest:info guest:attest-app-key
        guest:dashboard guest:containers guest:logs guest:metrics

The host lists the public key in its sys-config:
  {"guest_agent_api":{"anonymous_scopes":[],
    "external_issuers":[{"name":"NAME","public_keys":["<hex>"]}]}}
To rotate, list the new key beside the old, wait an hour, drop the old.
The caller presents the token as: Authorization: Bearer <token>
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, time.Now, rand.Reader))
}

// run is the whole tool; exit 0 ok, 2 bad usage or refused request, 1 I/O.
func run(args []string, stdout, stderr io.Writer, now func() time.Time, rnd io.Reader) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	fs := flag.NewFlagSet("guesttoken "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	keyPath := fs.String("key", "", "")
	iss := fs.String("iss", "", "")
	aud := fs.String("aud", "", "")
	scope := fs.String("scope", "", "")
	ttl := fs.Duration("ttl", guestauth.MaxLifetime, "")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprintf(stderr, "guesttoken: %v\n\n%s", err, usage)
		return 2
	}
	if *keyPath == "" || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "guesttoken: --key FILE is required\n\n%s", usage)
		return 2
	}
	var err error
	code := 1
	switch args[0] {
	case "keygen":
		err = keygen(*keyPath, stdout, rnd)
	case "pubkey":
		err = pubkey(*keyPath, stdout)
	case "mint":
		code = 2
		if *aud == "" {
			err = errors.New("--aud APPID is required")
			break
		}
		err = mint(*keyPath, guestauth.MintRequest{Iss: *iss, Aud: []string{*aud},
			Scopes: strings.FieldsFunc(*scope, func(r rune) bool { return r == ' ' || r == ',' }),
			TTL:    *ttl, Now: now()}, stdout)
	default:
		fmt.Fprintf(stderr, "guesttoken: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "guesttoken %s: %v\n", args[0], err)
		return code
	}
	return 0
}

func keygen(path string, stdout io.Writer, rnd io.Reader) error {
	pub, priv, err := ed25519.GenerateKey(rnd)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintln(stdout, hex.EncodeToString(pub))
	return nil
}

func loadKey(path string) (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s: no PRIVATE KEY PEM block", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ed, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an Ed25519 key", path)
	}
	return ed, nil
}

func pubkey(path string, stdout io.Writer) error {
	k, err := loadKey(path)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, hex.EncodeToString(k.Public().(ed25519.PublicKey)))
	return nil
}

func mint(path string, r guestauth.MintRequest, stdout io.Writer) error {
	if r.TTL > guestauth.MaxLifetime {
		return fmt.Errorf("--ttl %s is over the 1h maximum", r.TTL)
	}
	k, err := loadKey(path)
	if err != nil {
		return err
	}
	tok, err := guestauth.Mint(k, r)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, tok)
	return nil
}
