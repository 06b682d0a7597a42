package sandboxplan

import (
	"fmt"
	"strconv"
	"strings"

	"ctx/policy"
)

// The operations BuildPlan composes: budgets as limits, /etc, mounts.

// tmpfsSize is /tmp's size option: tmp_bytes (a tmpfs needs a size; an
// unlimited budget gets the kernel's default, half of RAM).
func tmpfsSize(b policy.Budgets) string {
	if b == nil {
		b = policy.DefaultBudgets()
	}
	v := b.Get("tmp_bytes")
	if v == policy.Unlimited {
		return ""
	}
	return strconv.FormatUint(v, 10)
}

// processLimits are the rlimits every process of the run starts with:
// CPU seconds, file size, open files, no core dumps, and, when no cgroup
// holds the run, the data segment and the processes of the agent's uid.
func processLimits(b policy.Budgets, cgroup bool) map[string]uint64 {
	if b == nil {
		b = policy.DefaultBudgets()
	}
	l := map[string]uint64{
		"cpu":    b.Get("cpu_s"),
		"fsize":  b.Get("file_bytes"),
		"nofile": b.Get("open_files"),
		"core":   0,
	}
	if !cgroup {
		l["data"] = b.Get("memory_bytes")
		l["nproc"] = b.Get("pids")
	}
	return l
}

func hostname(a *policy.Agent) string { return "ctx-" + a.Name }

// etcOps synthesizes /etc: a tmpfs holding passwd and group that name the
// agent, hosts, hostname and nsswitch.conf, then the host entries of
// HostEtcNames (resolv.conf only with the network; the run's DNS stub's
// with egress), read-only.
func etcOps(a *policy.Agent, in PlanInput, add func(Op)) {
	// Files and links are the tmpfs's Fill; host entries are bound after.
	var fill []FillEntry
	var binds []Op
	file := func(name, data string) {
		fill = append(fill, FillEntry{Path: name, Kind: FillFile, Data: []byte(data), Mode: 0o644})
	}
	passwd := "root:x:0:0:root:/root:/bin/sh\n"
	group := "root:x:0:\n"
	if a.UID != 0 && a.UID != 65534 {
		passwd += fmt.Sprintf("%s:x:%d:%d:ctx agent %s:%s:%s\n", a.Name, a.UID, a.GID, a.Name, SandboxHome, DefaultShell)
	}
	if a.GID != 0 && a.GID != 65534 {
		group += fmt.Sprintf("%s:x:%d:%s\n", a.Name, a.GID, a.Name)
	}
	if in.Iso == "uid" {
		for _, g := range a.Groups {
			if g != 0 && g != a.GID && g != 65534 {
				group += fmt.Sprintf("ctx-%d:x:%d:%s\n", g, g, a.Name)
			}
		}
	}
	passwd += "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	group += "nogroup:x:65534:\n"
	file("passwd", passwd)
	file("group", group)
	file("hostname", hostname(a)+"\n")
	file("hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t"+hostname(a)+"\n")
	file("nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n")
	if !in.Network && in.Egress != nil {
		// The run's DNS stub, whatever the host has.
		file("resolv.conf", EgressResolvConf())
	}
	for _, e := range in.Etc {
		if strings.Contains(e.Name, "/") || !validEtcName(e.Name) {
			continue
		}
		target := "/etc/" + e.Name
		switch {
		case e.Name == "resolv.conf":
			if in.Network && e.Data != nil {
				file(e.Name, string(e.Data))
			}
		case e.Symlink != "":
			fill = append(fill, FillEntry{Path: e.Name, Kind: FillLink, Link: e.Symlink})
		case e.Data != nil:
			file(e.Name, string(e.Data))
		default:
			op := Op{Kind: OpBind, Source: "/etc/" + e.Name, Target: target, ReadOnly: true, NoSuid: true, NoDev: true,
				Recursive: e.Dir, Optional: true, Why: "/etc"}
			binds = append(binds, op)
		}
	}
	add(Op{Kind: OpTmpfs, Target: "/etc", Mode: 0o755, Size: "1m", Why: "/etc", Fill: fill})
	for _, op := range binds {
		add(op)
	}
	add(Op{Kind: OpReadOnly, Target: "/etc"})
}

func validEtcName(name string) bool {
	for _, n := range HostEtcNames {
		if n == name {
			return true
		}
	}
	return false
}

// mountOp turns a mount entry into a bind operation. Sources written as ABI
// paths (/ctx/...) are re-rooted under the root on the host.
func mountOp(m policy.Mount, rootDir, why string) Op {
	src := m.Source
	if policy.Within(src, SandboxRoot) {
		src = policy.Rebase(src, SandboxRoot, rootDir)
	}
	return Op{Kind: OpBind, Source: src, Target: m.Target, ReadOnly: m.ReadOnly,
		NoSuid: m.NoSuid, NoDev: m.NoDev, NoExec: m.NoExec, Recursive: m.Bind == policy.BindRecursive, Why: why}
}
