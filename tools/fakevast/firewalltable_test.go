package main

import (
	"github.com/rayvast/rayvast/head/firewall"
	"github.com/rayvast/rayvast/head/statedir"
)

// tableOf is the firewall table of the head whose state is dir, as the
// head names it (firewall.TableFor its app id); the default table when dir
// holds no readable state yet.
func tableOf(dir string) string {
	st, err := statedir.Load(dir)
	if err != nil {
		return firewall.DefaultTable
	}
	return firewall.TableFor(st.AppID)
}
