package sandbox

import "fmt"

// Start starts the child, hands it the plan and releases it: the run
// host's steps, run at once (it starts the child inside the run's cgroup).
func (s *Sandbox) Start() error {
	if err := s.Cmd.Start(); err != nil {
		s.Abandon()
		return fmt.Errorf("starting the sandbox: %w", err)
	}
	s.SendPlan()
	s.Release()
	return nil
}
