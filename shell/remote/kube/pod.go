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
	// createTimeout bounds the request that creates a template's pod.
	createTimeout = 30 * time.Second
	// deleteTimeout bounds the deletion of a template's pod.
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
		Name              string            `json:"name"`
		Namespace         string            `json:"namespace"`
		UID               string            `json:"uid"`
		Annotations       map[string]string `json:"annotations"`
		DeletionTimestamp *string           `json:"deletionTimestamp"`
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

// waitReady polls the pod ns/name until it is ready, it failed,
// ReadyTimeout passed or ctx ended.
func (d *Dialer) waitReady(ctx context.Context, ns, podName string) error {
	ctx, cancel := context.WithTimeout(ctx, d.opts.ReadyTimeout)
	defer cancel()
	name := ns + "/" + podName
	var last pod
	for {
		raw, err := d.client.Get().Resource("pods").Namespace(ns).Name(podName).Do(ctx).Raw()
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

// deletePod deletes the pod ns/name at once (no grace: the agent has
// ended what it ran) and waits until the API server no longer has it. A
// uid other than "" is the delete's precondition: the pod of that name
// is deleted only while it is the one that was listed.
func (d *Dialer) deletePod(ctx context.Context, ns, name, uid string) error {
	if err := d.deleteNow(ctx, ns, name, uid); err != nil {
		return err
	}
	for {
		err := d.client.Get().Resource("pods").Namespace(ns).Name(name).Do(ctx).Error()
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("delete pod %s/%s: still there: %w", ns, name, context.Cause(ctx))
		case <-time.After(pollEvery):
		}
	}
}

// deleteNow asks the API server to delete the pod ns/name at once (uid
// as deletePod's), and does not wait for it to go. A pod that is not
// there is no error.
func (d *Dialer) deleteNow(ctx context.Context, ns, name, uid string) error {
	opts := map[string]any{"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
	if uid != "" {
		opts["preconditions"] = map[string]any{"uid": uid}
	}
	body, _ := json.Marshal(opts)
	err := d.client.Delete().Resource("pods").Namespace(ns).Name(name).Body(body).Do(ctx).Error()
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete pod %s/%s: %w", ns, name, err)
	}
	return nil
}
