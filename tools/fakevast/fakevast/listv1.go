package fakevast

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
)

// listV1 is GET /api/v1/instances/: keyset pagination by id (limit at most
// 25, ≤ 0 means 5, default 25), next_token null on the last page, an
// invalid after_token 400; select_filters eq/in on id, label and
// actual_status (README: show_instances).
func (s *Server) listV1(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 25
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			fail(w, http.StatusBadRequest, "invalid_args", "limit must be an integer")
			return
		}
		limit = min(n, 25)
		if n <= 0 {
			limit = 5
		}
	}
	after := int64(0)
	if t := q.Get("after_token"); t != "" {
		id, ok := parseToken(t)
		if !ok {
			fail(w, http.StatusBadRequest, "invalid_args", "invalid after_token")
			return
		}
		after = id
	}
	filters := map[string]map[string]any{}
	if f := q.Get("select_filters"); f != "" {
		if err := json.Unmarshal([]byte(f), &filters); err != nil {
			fail(w, http.StatusBadRequest, "invalid_args", "select_filters is not a JSON object")
			return
		}
	}
	if o := q.Get("order_by"); o != "" {
		var order []struct{ Col, Dir string }
		if err := json.Unmarshal([]byte(o), &order); err != nil {
			fail(w, http.StatusBadRequest, "invalid_args", "order_by is not a JSON array")
			return
		}
		for _, x := range order {
			if x.Col != "id" {
				fail(w, http.StatusBadRequest, "invalid_args", "fakevast orders by id only: "+x.Col)
				return
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]int64, 0, len(s.instances))
	for id, in := range s.instances {
		if !in.Destroyed && id > after {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	views := []map[string]any{}
	var next any
	for _, id := range ids {
		v := s.view(s.instances[id])
		ok, err := selected(v, filters)
		if err != nil {
			fail(w, http.StatusBadRequest, "invalid_args", err.Error())
			return
		}
		if !ok {
			continue
		}
		if len(views) == limit {
			next = token(views[len(views)-1]["id"].(int64))
			break
		}
		views = append(views, v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"success": true, "instances_found": len(views), "instances": views, "next_token": next})
}

func token(id int64) string {
	return base64.StdEncoding.EncodeToString([]byte(`{"values": {"id": ` + strconv.FormatInt(id, 10) + `}}`))
}

func parseToken(t string) (int64, bool) {
	b, err := base64.StdEncoding.DecodeString(t)
	if err != nil {
		return 0, false
	}
	var v struct {
		Values struct {
			ID *int64 `json:"id"`
		} `json:"values"`
	}
	if json.Unmarshal(b, &v) != nil || v.Values.ID == nil {
		return 0, false
	}
	return *v.Values.ID, true
}

var filterable = map[string]bool{"id": true, "label": true, "actual_status": true, "gpu_name": true}

func selected(v map[string]any, filters map[string]map[string]any) (bool, error) {
	for col, ops := range filters {
		if !filterable[col] {
			return false, &filterError{col}
		}
		have := v[col]
		if id, ok := have.(int64); ok {
			have = float64(id)
		}
		for op, want := range ops {
			ok, err := compare(have, op, want)
			if err != nil {
				return false, err
			}
			if !ok {
				return false, nil
			}
		}
	}
	return true, nil
}

type filterError struct{ col string }

func (e *filterError) Error() string { return "column not filterable: " + e.col }
