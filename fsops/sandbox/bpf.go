package sandbox

import (
	"errors"
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
)

// The classic BPF assembler the seccomp filters (seccomp.go, unixgate.go)
// are written with.

// bpfLabel names an instruction that jumps go to; bpfNext is the instruction
// after the jump.
type bpfLabel string

const bpfNext bpfLabel = ""

// bpfAssembler writes classic BPF with jumps to labels and resolves them
// at the end. Classic BPF jumps only forward, and a conditional jump
// reaches at most 255 instructions: assemble refuses a program that breaks
// either rule instead of letting an offset wrap into a wrong verdict.
type bpfAssembler struct {
	insns  []unix.SockFilter
	jumps  []bpfJump
	labels map[bpfLabel]int
	err    error
}

type bpfJump struct {
	at              int
	ifTrue, ifFalse bpfLabel
}

func (a *bpfAssembler) emit(code uint16, k uint32) {
	a.insns = append(a.insns, unix.SockFilter{Code: code, K: k})
}

// load puts the 32-bit word at offset in seccomp_data into the accumulator.
func (a *bpfAssembler) load(offset uint32) {
	a.emit(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, offset)
}

func (a *bpfAssembler) ret(action uint32) {
	a.emit(unix.BPF_RET|unix.BPF_K, action)
}

func (a *bpfAssembler) jumpIfEqual(k uint32, ifTrue, ifFalse bpfLabel) {
	a.jumps = append(a.jumps, bpfJump{len(a.insns), ifTrue, ifFalse})
	a.emit(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, k)
}

// jumpIfAnySet goes to ifTrue when the accumulator has any bit of mask.
func (a *bpfAssembler) jumpIfAnySet(mask uint32, ifTrue, ifFalse bpfLabel) {
	a.jumps = append(a.jumps, bpfJump{len(a.insns), ifTrue, ifFalse})
	a.emit(unix.BPF_JMP|unix.BPF_JSET|unix.BPF_K, mask)
}

// jump always goes to the label (BPF_JA, whose offset is 32 bits).
func (a *bpfAssembler) jump(to bpfLabel) {
	a.jumps = append(a.jumps, bpfJump{len(a.insns), to, to})
	a.emit(unix.BPF_JMP|unix.BPF_JA, 0)
}

// mark makes label name the next instruction emitted.
func (a *bpfAssembler) mark(label bpfLabel) {
	if a.labels == nil {
		a.labels = make(map[bpfLabel]int)
	}
	if _, dup := a.labels[label]; dup || label == bpfNext {
		a.err = errors.Join(a.err, fmt.Errorf("bpf label %q marked twice", label))
	}
	a.labels[label] = len(a.insns)
}

func (a *bpfAssembler) assemble() ([]unix.SockFilter, error) {
	if a.err != nil {
		return nil, a.err
	}
	if len(a.insns) == 0 || len(a.insns) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("bpf program of %d instructions (1 to %d allowed)", len(a.insns), unix.BPF_MAXINSNS)
	}
	if last := a.insns[len(a.insns)-1]; last.Code != unix.BPF_RET|unix.BPF_K {
		return nil, errors.New("bpf program does not end in a return")
	}
	prog := slices.Clone(a.insns)
	for _, j := range a.jumps {
		ifTrue, err := a.offset(j.at, j.ifTrue)
		if err != nil {
			return nil, err
		}
		ifFalse, err := a.offset(j.at, j.ifFalse)
		if err != nil {
			return nil, err
		}
		if prog[j.at].Code == unix.BPF_JMP|unix.BPF_JA {
			prog[j.at].K = uint32(ifTrue)
			continue
		}
		if ifTrue > 255 || ifFalse > 255 {
			return nil, fmt.Errorf("bpf jump at %d to %q/%q spans %d/%d instructions, more than 255",
				j.at, j.ifTrue, j.ifFalse, ifTrue, ifFalse)
		}
		prog[j.at].Jt, prog[j.at].Jf = uint8(ifTrue), uint8(ifFalse)
	}
	return prog, nil
}

// offset is how many instructions a jump at index at skips to reach label.
func (a *bpfAssembler) offset(at int, label bpfLabel) (int, error) {
	if label == bpfNext {
		return 0, nil
	}
	target, ok := a.labels[label]
	if !ok {
		return 0, fmt.Errorf("bpf jump at %d to unmarked label %q", at, label)
	}
	if target <= at {
		return 0, fmt.Errorf("bpf jump at %d to %q goes backwards", at, label)
	}
	if target >= len(a.insns) {
		return 0, fmt.Errorf("bpf jump at %d to %q runs off the end", at, label)
	}
	return target - at - 1, nil
}
