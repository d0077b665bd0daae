package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/yaml"
)

// Bounds of a template's pod.
const (
	// deleteTimeout bounds the deletion of a template's pod at Close.
	deleteTimeout = 30 * time.Second
	// pollEvery is how often a pod's status is read while it starts.
	pollEvery = 100 * time.Millisecond
)

// ManagedBy is the value of the app.kubernetes.io/managed-by label of
// the pods conch makes from templates.
const ManagedBy = "conch"

// readTemplate reads a pod manifest, YAML or JSON, as the JSON object
// the API server takes.
func readTemplate(file string) (map[string]any, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("pod template: %w", err)
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, fmt.Errorf("pod template %s: %w", file, err)
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil || m == nil {
		return nil, fmt.Errorf("pod template %s: not a manifest object", file)
	}
	if k, _ := m["kind"].(string); k != "" && k != "Pod" {
		return nil, fmt.Errorf("pod template %s: kind %q: want a Pod", file, k)
	}
	if v, _ := m["apiVersion"].(string); v != "" && v != "v1" {
		return nil, fmt.Errorf("pod template %s: apiVersion %q: want v1", file, v)
	}
	if _, ok := m["spec"].(map[string]any); !ok {
		return nil, fmt.Errorf("pod template %s: no spec", file)
	}
	m["kind"], m["apiVersion"] = "Pod", "v1"
	return m, nil
}

// pod is what is read here of a pod's JSON.
type pod struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Status struct {
		Phase      string `json:"phase"`
		Reason     string `json:"reason"`
		Message    string `json:"message"`
		Conditions []struct {
			Type    string `json:"type"`
			Status  string `json:"status"`
			Reason  string `json:"reason"`
			Message string `json:"message"`
		} `json:"conditions"`
		ContainerStatuses []struct {
			Name  string `json:"name"`
			State struct {
				Waiting    *containerState `json:"waiting"`
				Terminated *containerState `json:"terminated"`
			} `json:"state"`
		} `json:"containerStatuses"`
	} `json:"status"`
}

type containerState struct {
	Reason   string `json:"reason"`
	Message  string `json:"message"`
	ExitCode *int   `json:"exitCode"`
}

// ready reports whether the pod's Ready condition is true.
func (p *pod) ready() bool {
	for _, c := range p.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

// stuckReasons are the reasons a container waits that end only when
// someone changes the pod: the wait stops at once.
var stuckReasons = map[string]bool{
	"ErrImageNeverPull": true, "InvalidImageName": true, "CreateContainerConfigError": true,
	"CreateContainerError": true, "RunContainerError": true, "CrashLoopBackOff": true,
}

// failed reports whether the pod cannot become ready without a change:
// it ended, or a container waits for a reason that will not pass.
func (p *pod) failed() bool {
	if p.Status.Phase == "Failed" || p.Status.Phase == "Succeeded" {
		return true
	}
	for _, c := range p.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil && stuckReasons[w.Reason] {
			return true
		}
	}
	return false
}

// describe is the pod's status in a line: its phase, then why its
// containers are not running, else its conditions that are not true.
func (p *pod) describe() string {
	parts := []string{cmp(p.Status.Phase, "no status yet")}
	if r := join(p.Status.Reason, p.Status.Message); r != "" {
		parts = append(parts, r)
	}
	for _, c := range p.Status.ContainerStatuses {
		switch s := c.State; {
		case s.Waiting != nil:
			parts = append(parts, fmt.Sprintf("container %s waiting: %s", c.Name, join(s.Waiting.Reason, s.Waiting.Message)))
		case s.Terminated != nil:
			t := join(s.Terminated.Reason, s.Terminated.Message)
			if s.Terminated.ExitCode != nil {
				t += fmt.Sprintf(" (exit code %d)", *s.Terminated.ExitCode)
			}
			parts = append(parts, fmt.Sprintf("container %s terminated: %s", c.Name, t))
		}
	}
	if len(p.Status.ContainerStatuses) == 0 {
		for _, c := range p.Status.Conditions {
			if c.Status != "True" && (c.Reason != "" || c.Message != "") {
				parts = append(parts, fmt.Sprintf("%s: %s", c.Type, join(c.Reason, c.Message)))
			}
		}
	}
	return strings.Join(parts, "; ")
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func join(reason, msg string) string {
	switch {
	case reason == "":
		return msg
	case msg == "":
		return reason
	}
	return reason + ": " + msg
}

// createPod makes a pod from the host's template and waits until it is
// ready (bounded by ReadyTimeout and ctx). A pod that does not become
// ready is deleted, and the error names its status.
func (d *Dialer) createPod(ctx context.Context) error {
	m, err := readTemplate(d.host.Template)
	if err != nil {
		return err
	}
	meta, _ := m["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		m["metadata"] = meta
	}
	if ns, _ := meta["namespace"].(string); ns != "" {
		d.host.Namespace = ns
	}
	meta["namespace"] = d.host.Namespace
	if n, _ := meta["name"].(string); n == "" {
		// Each executor its own pod: two conch servers share no template's pod.
		if g, _ := meta["generateName"].(string); g == "" {
			meta["generateName"] = "conch-"
		}
	}
	labels, _ := meta["labels"].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
		meta["labels"] = labels
	}
	labels["app.kubernetes.io/managed-by"] = ManagedBy
	// A command in the pod must not reach the API server with the pod's
	// service account (a client of the control plane conch itself drives):
	// no token is mounted unless the manifest asks for one.
	spec := m["spec"].(map[string]any) // readTemplate checked it
	if _, set := spec["automountServiceAccountToken"]; !set {
		spec["automountServiceAccountToken"] = false
	}
	body, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("pod template: %w", err)
	}
	raw, err := d.client.Post().Resource("pods").Namespace(d.host.Namespace).Body(body).Do(ctx).Raw()
	if err != nil {
		return fmt.Errorf("create a pod from %s: %w", d.host.Template, err)
	}
	var p pod
	if err := json.Unmarshal(raw, &p); err != nil || p.Metadata.Name == "" {
		return fmt.Errorf("create a pod from %s: the API server's answer has no pod name", d.host.Template)
	}
	d.pod, d.created = p.Metadata.Name, true
	if err := d.waitReady(ctx); err != nil {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
		defer cancel()
		d.deletePod(dctx, d.pod)
		d.pod, d.created = "", false
		return err
	}
	return nil
}

// waitReady polls the pod until it is ready, it failed, ReadyTimeout
// passed or ctx ended.
func (d *Dialer) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.opts.ReadyTimeout)
	defer cancel()
	name := d.host.Namespace + "/" + d.pod
	var last pod
	for {
		raw, err := d.client.Get().Resource("pods").Namespace(d.host.Namespace).Name(d.pod).Do(ctx).Raw()
		if err == nil {
			last = pod{}
			if err := json.Unmarshal(raw, &last); err != nil {
				return fmt.Errorf("pod %s: read its status: %w", name, err)
			}
			switch {
			case last.ready():
				return nil
			case last.failed():
				return fmt.Errorf("pod %s cannot become ready: %s", name, last.describe())
			}
		} else if ctx.Err() == nil {
			return fmt.Errorf("pod %s: read its status: %w", name, err)
		}
		select {
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), context.DeadlineExceeded) && ctx.Err() != nil {
				return fmt.Errorf("pod %s did not become ready within %v: %s", name, d.opts.ReadyTimeout, last.describe())
			}
			return fmt.Errorf("pod %s: %w", name, context.Cause(ctx))
		case <-time.After(pollEvery):
		}
	}
}

// deletePod deletes the pod at once (no grace: the agent has ended what
// it ran) and waits until the API server no longer has it.
func (d *Dialer) deletePod(ctx context.Context, name string) error {
	err := d.client.Delete().Resource("pods").Namespace(d.host.Namespace).Name(name).
		Body([]byte(`{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0}`)).Do(ctx).Error()
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s/%s: %w", d.host.Namespace, name, err)
	}
	for {
		err := d.client.Get().Resource("pods").Namespace(d.host.Namespace).Name(name).Do(ctx).Error()
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("delete pod %s/%s: still there: %w", d.host.Namespace, name, context.Cause(ctx))
		case <-time.After(pollEvery):
		}
	}
}
