// Package queue is the shared queue of a shared space: a job queue made of
// directories and renames, with no daemon, watcher or polling loop. It
// follows the seed's "Shared queue file protocol" step by step:
//
//	queue/{inbox,pending,lease,claimed,done,failed}/, J = <object name>.req.json
//	PENDING  pending/J            CLAIMED  claimed/J/J + lease/J/worker
//	DONE     done/J + done/J.result        FAILED  failed/J + failed/J.result
//
//	publish  write .J.tmp-PID-RAND in pending/, fsync; rename to J (noreplace); fsync pending/
//	claim    mkdir claimed/J           the only arbitration: EEXIST means lost
//	         rename pending/J -> claimed/J/J (ENOENT: lost; rmdir claimed/J)
//	         fsync claimed/J/, pending/, claimed/   the claim move is durable
//	lease    mkdir lease/J; write, fsync .worker.tmp-PID-RAND; rename to worker
//	         (noreplace); fsync lease/J/, lease/    only now may the job run
//	finish   write, fsync done/.J.result.tmp-PID-RAND; rename to J.result
//	         (noreplace); fsync done/; rename claimed/J/J -> done/J (noreplace);
//	         fsync claimed/J/, done/; unlink lease/J/worker, rmdir lease/J,
//	         rmdir claimed/J, fsyncing each parent       (failed/ alike)
//	recover  claim + lease, no pending or terminal entry, holder provably gone
//	         (or force): rename claimed/J/J -> pending/J (noreplace), fsync,
//	         clean up as finish does; anything else incomplete is refused
//
// Nothing is renamed over anything: results and requests move with
// RENAME_NOREPLACE (link(2), which fails on EEXIST, where a filesystem lacks
// it). Every operation is relative to directory descriptors opened with
// O_NOFOLLOW, so symlinks are never followed; dot names, invalid names,
// symlinks and non-regular files are never jobs. A crash between any two
// steps leaves either a complete state or one of the incomplete states of
// Classify, which Scan reports and Recover repairs where the seed allows.
//
// The step boundaries, in order, are named for the crash tests:
//
//	publish.temp-created publish.temp-written publish.temp-synced publish.renamed publish.synced
//	claim.mkdir claim.renamed claim.synced
//	lease.mkdir lease.temp-created lease.temp-written lease.temp-synced lease.renamed lease.synced
//	finish.temp-created finish.temp-written finish.temp-synced finish.result-renamed
//	finish.result-synced finish.request-renamed finish.request-synced
//	finish.lease-removed finish.lease-dir-removed finish.claim-dir-removed
//	recover.renamed recover.synced recover.lease-removed recover.lease-dir-removed
//	recover.claim-dir-removed
//	ingest.synced ingest.renamed ingest.dirs-synced
//
// The crash tests reach each boundary through stepHook, an unexported
// variable that only this package's tests assign, in a re-executed test
// binary that then SIGKILLs itself there. Nothing in a production binary
// (no flag, environment variable or file) can set it.
//
// Concurrency: any number of processes may operate on one queue at once;
// they arbitrate only through the filesystem. A Queue value is for one
// goroutine.
package queue
