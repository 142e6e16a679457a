package wire

import (
	"fmt"
	"log/slog"
)

// The types below carry secrets on the wire. Printing one with %v or logging
// it with slog shows only its non-secret fields. (JSON is their wire form, so
// MarshalJSON is left alone: never json.Marshal one of them into a log.)

func (r EnrollRequest) String() string {
	return fmt.Sprintf("EnrollRequest{instance_id=%s gpus=%d ports=%d}", r.InstanceID, r.GPUs, len(r.Ports))
}
func (r EnrollRequest) GoString() string { return r.String() }
func (r EnrollRequest) LogValue() slog.Value {
	return slog.GroupValue(slog.String("instance_id", r.InstanceID), slog.Int("gpus", r.GPUs))
}

func (r EnrollResponse) String() string {
	return fmt.Sprintf("EnrollResponse{app_id=%s node_ip=%s}", r.AppID, r.Ray.NodeIPAddress)
}
func (r EnrollResponse) GoString() string { return r.String() }
func (r EnrollResponse) LogValue() slog.Value {
	return slog.GroupValue(slog.String("app_id", r.AppID), slog.String("node_ip", r.Ray.NodeIPAddress))
}

func (c CandidateCreated) String() string {
	return fmt.Sprintf("CandidateCreated{candidate_id=%s}", c.CandidateID)
}
func (c CandidateCreated) GoString() string { return c.String() }
func (c CandidateCreated) LogValue() slog.Value {
	return slog.GroupValue(slog.String("candidate_id", c.CandidateID))
}

func (h Heartbeat) String() string {
	return fmt.Sprintf("Heartbeat{instance_id=%s seq=%d ray=%s}", h.InstanceID, h.Seq, h.Ray.State)
}
func (h Heartbeat) GoString() string { return h.String() }
func (h Heartbeat) LogValue() slog.Value {
	return slog.GroupValue(slog.String("instance_id", h.InstanceID), slog.Int64("seq", h.Seq), slog.String("ray", h.Ray.State))
}

func (a AppFile) String() string   { return fmt.Sprintf("AppFile{app_id=%s}", a.AppID) }
func (a AppFile) GoString() string { return a.String() }
func (a AppFile) LogValue() slog.Value {
	return slog.GroupValue(slog.String("app_id", a.AppID))
}
