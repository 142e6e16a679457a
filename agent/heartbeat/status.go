package heartbeat

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/rayvast/rayvast/internal/wire"
)

// StatusError is a head's answer other than success: the HTTP status and
// the body's error word.
type StatusError struct {
	Op   string
	Code int
	Word string // wire.ErrorBody's error
}

func (e *StatusError) Error() string { return fmt.Sprintf("%s: status %d %s", e.Op, e.Code, e.Word) }

// UnknownNode says err is the head's answer that it has not enrolled this
// node or has ended it (403 unknown_node): the node's rental is no
// cluster's any more.
func UnknownNode(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == http.StatusForbidden && se.Word == wire.ErrUnknownNode
}
