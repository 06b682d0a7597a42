package queue

import (
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"ctx/fsops"
	"ctx/policy"
)

// JobSuffix ends every job (request) name.
const JobSuffix = ".req.json"

// ResultSuffix is appended to a job name to name its result.
const ResultSuffix = ".result"

// ReservedSpace is the shared space bootstrap keeps for the manual bundle;
// it is never a queue.
const ReservedSpace = "cortexfs-docs"

// ValidJobName checks that s can name a job: a valid object name (the
// 64-byte grammar of policy.ValidName) ending in ".req.json" with at least
// one byte before the suffix. Because object names start with a letter or
// digit, no job name starts with a dot, so temporaries are never jobs.
func ValidJobName(s string) error {
	if err := policy.ValidName(s); err != nil {
		return err
	}
	if !strings.HasSuffix(s, JobSuffix) {
		return &policy.NameError{Name: s, Reason: `a job name must end in "` + JobSuffix + `"`}
	}
	return nil
}

// ValidSpaceName checks that s can name a shared space with a queue: a
// valid object name other than the reserved cortexfs-docs.
func ValidSpaceName(s string) error {
	if err := policy.ValidName(s); err != nil {
		return err
	}
	if s == ReservedSpace {
		return &policy.NameError{Name: s, Reason: "reserved for the manual bundle"}
	}
	return nil
}

// ValidWorkerName checks a worker name: a valid object name.
func ValidWorkerName(s string) error { return policy.ValidName(s) }

// GenerateName returns a fresh job name that sorts by publication time:
// "20260622T120000.123456789Z-<8 hex>.req.json" (44 bytes). The UTC time
// first makes name order publication order, which is the order claim takes
// jobs in; the random part makes two publishers in the same nanosecond
// distinct.
func GenerateName(now time.Time) string {
	var r [4]byte
	if err := fsops.RandomBytes(r[:]); err != nil {
		panic(fmt.Sprintf("queue: no system entropy: %v", err))
	}
	return now.UTC().Format("20060102T150405.000000000Z") + "-" + hex.EncodeToString(r[:]) + JobSuffix
}

// resultName is J's result name, J + ".result".
func resultName(job string) string { return job + ResultSuffix }

// jobOfResult returns J for a valid result name J.result.
func jobOfResult(name string) (string, bool) {
	job, ok := strings.CutSuffix(name, ResultSuffix)
	if !ok || ValidJobName(job) != nil {
		return "", false
	}
	return job, true
}
