// Package ptyterm is ctxterm: the owner of an agent's pseudo-terminal, its
// terminal socket (the watch/attach protocol), the session record, and the
// client that `ctx agent watch|attach` use, with the filter that keeps an
// agent's terminal strings (clipboard, title, device control) from a
// person's terminal (ControlFilter).
//
// Serve runs one command on a new PTY for its whole life. Its goroutines:
// one reads the PTY master and only reads (a PTY yields at most 4 KiB per
// read, and the program stalls while that buffer is full); deliverOutput
// fans the output out to the scrollback, the clients' bounded queues, the
// recorder and the local console; each client has a writer and a reader;
// the recorder cuts output into JSONL lines and appends them. The hub's
// mutex orders output against joins, so a new client gets the scrollback
// and then every later byte exactly once.
//
// Two PTY rules: on Linux a read of EIO from the master is end of file
// (no process holds the terminal any more), and the master must be a
// poller-managed, non-blocking file so that Close unblocks a pending Read
// (see openPTY).
//
// The protocol, limits and record format are documented byte for byte in
// the ctxterm manual page (manual/ctxterm.md).
package ptyterm
