package fakevast

import (
	"context"
	"sync"
)

// exits records which instances' containers have exited (vast shows
// actual_status "exited" then).
type exits struct {
	mu   sync.Mutex
	done map[int64]bool
}

func (e *exits) mark(id int64) {
	e.mu.Lock()
	if e.done == nil {
		e.done = map[int64]bool{}
	}
	e.done[id] = true
	e.mu.Unlock()
}

func (e *exits) has(id int64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.done[id]
}

// watch waits for the container of instance id to stop running.
func (d *Docker) watch(id int64, container string) {
	go func() {
		if _, err := d.eng.WaitContainer(context.Background(), container); err == nil {
			d.exited.mark(id)
		}
	}()
}

// Exited implements ExitWatcher.
func (d *Docker) Exited(id int64) bool { return d.exited.has(id) }

// ExposedPorts implements ImageInspector: the image's EXPOSE ports, which
// vast counts against an instance's 64 (an image not here runs as the
// fallback image, whose ports count then).
func (d *Docker) ExposedPorts(ctx context.Context, image string) (int, error) {
	info, err := d.eng.InspectImage(ctx, image)
	if err != nil {
		if info, err = d.eng.InspectImage(ctx, d.cfg.Image); err != nil {
			return 0, err
		}
	}
	return len(info.Config.ExposedPorts), nil
}
