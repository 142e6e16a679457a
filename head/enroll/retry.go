package enroll

import (
	"log/slog"
	"net/http"

	"github.com/rayvast/rayvast/head/metrics"
	"github.com/rayvast/rayvast/head/registry"
	"github.com/rayvast/rayvast/internal/answer"
	"github.com/rayvast/rayvast/internal/wire"
)

// reissue answers the same agent's retry of an enrollment that completed
// but whose answer it never got (docs/protocol.md §6 step 2 Retries): a fresh node key
// and certificate, whose serial replaces the old one.
func (s *Server) reissue(w http.ResponseWriter, req *wire.EnrollRequest, cl *registry.Claim, log *slog.Logger) error {
	resp, serial, err := s.bundle(req, cl.Candidate)
	if err != nil {
		s.cfg.Registry.Release(cl)
		s.cfg.Metrics.Enrollment(metrics.OutcomeError)
		return err
	}
	if _, err := s.cfg.Registry.Reissue(cl, serial); err != nil {
		s.cfg.Metrics.Enrollment(metrics.OutcomeError)
		return err
	}
	s.cfg.Metrics.Enrollment(metrics.OutcomeEnrolled)
	log.Info("enrollment retried: certificate reissued", "serial", serial)
	answer.JSON(w, http.StatusOK, resp)
	return nil
}
