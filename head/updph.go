package main

import (
	"context"
	"log/slog"
)

// dphTap passes every log record on and tells the progress of those that
// carry a candidate's price (the constant keys "candidate" and "dph", as the
// vast provider logs a rental), so head up can show $/h when it is known.
type dphTap struct {
	slog.Handler
	p *progress
}

func (h dphTap) Handle(ctx context.Context, r slog.Record) error {
	var cand string
	var dph float64
	var has bool
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "candidate":
			cand = a.Value.String()
		case "dph":
			if v := a.Value.Resolve(); v.Kind() == slog.KindFloat64 {
				dph, has = v.Float64(), true
			}
		}
		return true
	})
	if cand != "" && has {
		h.p.price(cand, dph)
	}
	return h.Handler.Handle(ctx, r)
}

func (h dphTap) WithAttrs(as []slog.Attr) slog.Handler {
	return dphTap{h.Handler.WithAttrs(as), h.p}
}

func (h dphTap) WithGroup(name string) slog.Handler {
	return dphTap{h.Handler.WithGroup(name), h.p}
}
