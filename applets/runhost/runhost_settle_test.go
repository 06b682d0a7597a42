package runhost

import (
	"path/filepath"
	"testing"
	"time"

	"ctx/fsops/broker"
)

// TestSettleBrokerAnswersTheLastCalls: a call's exit that the init
// reported just before the run's end, still unread on the order channel
// when the run host closes the run (its reader not yet scheduled, as on a
// busy machine), reaches the call: a joined program's status was lost
// about one run in sixteen under load ("the sandbox is gone", 69). The
// reader here starts only after the run's end has begun; without the
// settling step the channel is closed under it and the call hears 69.
func TestSettleBrokerAnswersTheLastCalls(t *testing.T) {
	host, init, err := broker.NewOrderChannel()
	if err != nil {
		t.Fatal(err)
	}
	defer init.Close()
	listen, err := broker.Listen(filepath.Join(t.TempDir(), broker.SocketName))
	if err != nil {
		t.Fatal(err)
	}
	b := &Broker{host: host, listen: listen, waiting: map[uint64]chan broker.InitReport{}, readDone: make(chan struct{})}
	r := &AgentRun{broker: b}
	id, done := b.expect()
	if err := broker.Send(int(init.Fd()), broker.InitReport{Op: broker.OpExit, ID: id, Status: 7}, nil); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		b.readInit()
	}()
	r.settleBroker()
	r.closeBroker()
	select {
	case o := <-done:
		if o.Status != 7 {
			t.Fatalf("the call heard status %d (%q), want the 7 the init reported", o.Status, o.Error)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call heard nothing")
	}
}
