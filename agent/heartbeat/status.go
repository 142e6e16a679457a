package heartbeat

import (
	"errors"
	"fmt"
	"net/http"
)

// StatusError is a head's answer other than success: the HTTP status and
// the body's error word.
type StatusError struct {
	Op      string
	Code    int
	Word    string // wire.ErrorBody's error
	Unknown bool   // wire.NodeStatusHeader said wire.NodeUnknown
}

func (e *StatusError) Error() string { return fmt.Sprintf("%s: status %d %s", e.Op, e.Code, e.Word) }

// UnknownNode says err is the head's answer that it has not enrolled this
// node or has ended it (a 403 with wire.NodeStatusHeader unknown): the
// node's rental is no cluster's any more.
func UnknownNode(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == http.StatusForbidden && se.Unknown
}
