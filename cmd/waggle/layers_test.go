package main

import (
	"os/exec"
	"strings"
	"testing"
)

// layers ranks waggle's packages: a package imports only packages of a
// lower rank, so data flows one way (frontend -> broker -> raft -> state
// machine -> store) and no room reaches back up. A new package needs a
// rank here.
var layers = map[string]int{
	"cmd/waggle": 100,
	"node":       90,
	"kafka":      80, "broker/httpapi": 80,
	"raftgroups": 75,
	"broker":     70,
	"raftnode":   60,
	"fsm":        50, "fsm/fsmtest": 50,
	"command": 40,
	"store":   30,
	"segment": 20, "router": 20, "raftmux": 20, "tlsconf": 20, "auth": 20, "metrics": 20,
	"dedup": 10, "recordbatch": 10, "payload": 10, "client": 10, "clock": 10,
	"fault":                 5,   // a waggle_faults build's bugs, asked by any layer
	"integration":           200, // tests only: they run the binary
	"integration/txncheck":  190, // the history checker the integration tests use
	"integration/powerloss": 190, // the power-loss file system the integration tests mount
}

func TestPackagesImportOnlyLowerLayers(t *testing.T) {
	const module = "github.com/waggle-mq/waggle/"
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		rank, ok := layers[pkg]
		if !ok {
			t.Errorf("package %s has no rank in layers", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			dep, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			if layers[dep] >= rank {
				t.Errorf("%s (rank %d) imports %s (rank %d): an import may only go down", pkg, rank, dep, layers[dep])
			}
		}
	}
}
