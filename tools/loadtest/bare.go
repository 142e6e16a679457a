package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/rayvast/rayvast/internal/wire"
)

// runBare is the reference: a bare Go HTTPS server doing a heartbeat's
// unavoidable work and nothing else: mutual TLS verified by crypto/tls with
// the cluster CA, decode the body, answer the same JSON. The head's port B
// is measured against it in the same run on the same machine.
func runBare(args []string) int {
	fs := flag.NewFlagSet("bare", flag.ContinueOnError)
	ca := fs.String("ca", "", "CA PEM")
	cert := fs.String("cert", "", "server cert PEM")
	key := fs.String("key", "", "server key PEM")
	listen := fs.String("listen", "", "address")
	if fs.Parse(args) != nil {
		return 2
	}
	raiseNoFile()
	caPEM, err := os.ReadFile(*ca)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	kp, err := tls.LoadX509KeyPair(*cert, *key)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /heartbeat", func(w http.ResponseWriter, r *http.Request) {
		var hb wire.Heartbeat
		if err := wire.Decode(r.Body, wire.MaxBody, &hb); err != nil || hb.InstanceID == "" {
			http.Error(w, `{"error":"bad_request"}`, 400)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"interval_s":30,"action":"none"}` + "\n"))
	})
	srv := &http.Server{Addr: *listen, Handler: mux, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 90 * time.Second,
		// The coordinator's readiness probe connects and hangs up: not news.
		ErrorLog:  log.New(io.Discard, "", 0),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{kp}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}}
	fmt.Fprintln(os.Stderr, srv.ListenAndServeTLS("", ""))
	return 1
}
