package tasks

// Handle returns the Handle of task id and a snapshot of the task, for
// what a producer offers beyond reads (typing into a terminal). Work that
// has already ended is settled first, so the snapshot never says running
// for it. It does not collect the result. Access errors are those of Get.
func (r *Runtime) Handle(owner, id string) (Handle, Info, error) {
	t, err := r.lookup(owner, id)
	if err != nil {
		return nil, Info{}, err
	}
	r.settleIfEnded(t, false)
	return t.h, t.info(), nil
}
