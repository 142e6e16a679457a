package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxBody is the largest request body any rayvast endpoint reads (docs/protocol.md §4).
const MaxBody = 64 << 10

// ErrTooLarge is returned by Decode when the body exceeds its limit.
var ErrTooLarge = errors.New("body too large")

// Decode reads exactly one JSON value into v from at most limit bytes of r:
// unknown fields, wrong types and trailing data are errors. Error messages
// name fields and types, never values, so they are safe to send back.
func Decode(r io.Reader, limit int64, v any) error { return decode(r, limit, v, true) }

// DecodeTolerant is Decode with fields v does not know ignored: for an
// answer from the head (mutual TLS, trusted) that a later head may extend,
// such as the heartbeat reply (protocol history 29). Wrong types, trailing
// data and the limit are still errors.
func DecodeTolerant(r io.Reader, limit int64, v any) error { return decode(r, limit, v, false) }

func decode(r io.Reader, limit int64, v any, strict bool) error {
	lr := &io.LimitedReader{R: r, N: limit + 1}
	dec := json.NewDecoder(lr)
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		if lr.N <= 0 {
			return ErrTooLarge
		}
		return describe(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		if lr.N <= 0 {
			return ErrTooLarge
		}
		return errors.New("trailing data after JSON value")
	}
	if lr.N <= 0 {
		return ErrTooLarge
	}
	return nil
}

func describe(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return fmt.Errorf("field %q: want %s", te.Field, te.Type)
	case errors.As(err, &se):
		return fmt.Errorf("malformed JSON at offset %d", se.Offset)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("truncated JSON")
	default:
		// "json: unknown field \"x\"" and similar: these quote names, not values.
		return err
	}
}
