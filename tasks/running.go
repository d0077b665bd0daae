package tasks

// Running reports how many tasks of all owners are running or stopping
// now, starts in progress included (what each owner's limit counts): the
// conch_tasks_running gauge (docs/operations.md#metrics).
func (r *Runtime) Running() int {
	r.mu.RLock()
	owners := make([]*owner, 0, len(r.owners))
	for _, o := range r.owners {
		owners = append(owners, o)
	}
	r.mu.RUnlock()
	n := 0
	for _, o := range owners {
		o.mu.Lock()
		n += o.active
		o.mu.Unlock()
	}
	return n
}
