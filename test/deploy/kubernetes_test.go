package deploy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"time"

	"go.yaml.in/yaml/v4"
)

// object is the part of a Kubernetes object these checks read.
type object struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"` // ConfigMap
	Spec struct {
		Replicas *int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
		MaxUnavailable any `yaml:"maxUnavailable"` // PodDisruptionBudget
		MinAvailable   any `yaml:"minAvailable"`
	} `yaml:"spec"`
}

type podSpec struct {
	Grace           *int64          `yaml:"terminationGracePeriodSeconds"`
	SecurityContext securityContext `yaml:"securityContext"`
	Containers      []container     `yaml:"containers"`
}

type securityContext struct {
	RunAsNonRoot             *bool  `yaml:"runAsNonRoot"`
	RunAsUser                *int64 `yaml:"runAsUser"`
	ReadOnlyRootFilesystem   *bool  `yaml:"readOnlyRootFilesystem"`
	AllowPrivilegeEscalation *bool  `yaml:"allowPrivilegeEscalation"`
}

type container struct {
	Name  string `yaml:"name"`
	Image string `yaml:"image"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	EnvFrom []struct {
		ConfigMapRef *struct {
			Name string `yaml:"name"`
		} `yaml:"configMapRef"`
	} `yaml:"envFrom"`
	Env []struct {
		Name      string  `yaml:"name"`
		Value     *string `yaml:"value"`
		ValueFrom *struct {
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	StartupProbe   *k8sProbe `yaml:"startupProbe"`
	LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
	ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
	Lifecycle      struct {
		PreStop *struct {
			Sleep *struct {
				Seconds int64 `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
	} `yaml:"resources"`
	SecurityContext securityContext `yaml:"securityContext"`
}

type k8sProbe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
}

// The DSN a secretKeyRef stands for when the settings are loaded.
const secretDSN = "seckill:secret@tcp(mysql:3306)/seckill?parseTime=true"

func decodeAll(text string) ([]object, error) {
	var objs []object
	dec := yaml.NewDecoder(bytes.NewReader([]byte(text)))
	for {
		var o object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if o.Kind != "" {
			objs = append(objs, o)
		}
	}
}

func checkKubernetes(where, text string, img imageConfig, served probe, p *problems) {
	objs, err := decodeAll(text)
	if err != nil {
		p.add(where, "does not parse: %v", err)
		return
	}
	configMaps := map[string]map[string]string{}
	pdbs := map[string]object{}
	for _, o := range objs {
		switch o.Kind {
		case "ConfigMap":
			configMaps[o.Metadata.Name] = o.Data
		case "PodDisruptionBudget":
			pdbs[o.Metadata.Name] = o
		}
	}
	workloads := 0
	for _, o := range objs {
		switch o.Kind {
		case "Deployment", "ReplicaSet", "DaemonSet":
			p.add(where, "%s %s: pod names change on every restart; run seckill as a StatefulSet, "+
				"whose stable pod names are the consumer names", o.Kind, o.Metadata.Name)
		case "StatefulSet":
			workloads++
			at := fmt.Sprintf("%s StatefulSet %s", where, o.Metadata.Name)
			checkStatefulSet(at, o, img, configMaps, served, p)
			covered := false
			for _, pdb := range pdbs {
				if maps.Equal(pdb.Spec.Selector.MatchLabels, o.Spec.Selector.MatchLabels) {
					covered = true
				}
			}
			if !covered {
				p.add(at, "no PodDisruptionBudget selects its pods: a node drain could stop every instance at once")
			}
		}
	}
	if workloads == 0 {
		p.add(where, "no StatefulSet")
	}
}

func checkStatefulSet(at string, o object, img imageConfig, configMaps map[string]map[string]string, served probe, p *problems) {
	pod := o.Spec.Template.Spec
	var c *container
	for i := range pod.Containers {
		if (composeService{Image: pod.Containers[i].Image}).imageIs("seckill") {
			c = &pod.Containers[i]
		}
	}
	if c == nil {
		p.add(at, "no container runs the seckill image")
		return
	}
	if img.name != "" && c.Image != img.name {
		p.add(at, "image %q is not the one make image builds (%q)", c.Image, img.name)
	}
	env := maps.Clone(img.env)
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef == nil {
			continue
		}
		data, ok := configMaps[ef.ConfigMapRef.Name]
		if !ok {
			p.add(at, "envFrom names ConfigMap %q, which this file does not define", ef.ConfigMapRef.Name)
		}
		maps.Copy(env, data)
	}
	consumerFromPodName := false
	for _, e := range c.Env {
		switch {
		case e.Value != nil:
			env[e.Name] = *e.Value
			if e.Name == "SECKILL_MYSQL_DSN" {
				p.add(at, "SECKILL_MYSQL_DSN is written in the manifest; take it from a Secret (secretKeyRef)")
			}
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			env[e.Name] = o.Metadata.Name + "-0"
			consumerFromPodName = consumerFromPodName || e.Name == "SECKILL_CONSUMER" && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = secretDSN
		}
	}
	if !consumerFromPodName {
		p.add(at, "SECKILL_CONSUMER must be the pod's name (valueFrom.fieldRef metadata.name): "+
			"one name per replica, the same across its restarts")
	}
	grace := int64(30) // Kubernetes' default
	if pod.Grace != nil {
		grace = *pod.Grace
	}
	var pause time.Duration
	if ps := c.Lifecycle.PreStop; ps != nil && ps.Sleep != nil {
		pause = time.Duration(ps.Sleep.Seconds) * time.Second
	}
	cfg := checkInstance(instance{where: at, env: env, grace: time.Duration(grace) * time.Second, pause: pause}, p)

	checkSecurity(at, pod.SecurityContext, c.SecurityContext, img, p)
	if len(c.Resources.Requests) == 0 {
		p.add(at, "no resource requests: the scheduler could pack instances onto one busy node")
	}
	port := httpPort(cfg)
	for _, pr := range []struct {
		name     string
		probe    *k8sProbe
		required bool
	}{
		{"readinessProbe", c.ReadinessProbe, true},
		{"livenessProbe", c.LivenessProbe, true},
		{"startupProbe", c.StartupProbe, false},
	} {
		if pr.probe == nil || pr.probe.HTTPGet == nil {
			if pr.required {
				p.add(at, "no %s (httpGet)", pr.name)
			}
			continue
		}
		g := pr.probe.HTTPGet
		if err := served(g.Path); err != nil {
			p.add(at, "%s %s: %v", pr.name, g.Path, err)
		}
		probePort := 0
		switch v := g.Port.(type) {
		case int:
			probePort = v
		case string:
			for _, cp := range c.Ports {
				if cp.Name == v {
					probePort = cp.ContainerPort
				}
			}
		}
		if probePort != port {
			p.add(at, "%s asks port %v, but SECKILL_HTTP_ADDR listens on %d", pr.name, g.Port, port)
		}
	}
	if c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		p.add(at, "readinessProbe asks %s; /readyz is the one that says whether Redis and the database answer",
			c.ReadinessProbe.HTTPGet.Path)
	}
}

func checkSecurity(at string, pod, ctr securityContext, img imageConfig, p *problems) {
	nonRoot := ctr.RunAsNonRoot
	if nonRoot == nil {
		nonRoot = pod.RunAsNonRoot
	}
	if nonRoot == nil || !*nonRoot {
		p.add(at, "runAsNonRoot is not true")
	}
	user := ctr.RunAsUser
	if user == nil {
		user = pod.RunAsUser
	}
	if user != nil && *user == 0 {
		p.add(at, "runAsUser 0: the image runs as %s", img.user)
	}
	if ctr.ReadOnlyRootFilesystem == nil || !*ctr.ReadOnlyRootFilesystem {
		p.add(at, "readOnlyRootFilesystem is not true (the service writes nothing with MySQL)")
	}
	if ctr.AllowPrivilegeEscalation == nil || *ctr.AllowPrivilegeEscalation {
		p.add(at, "allowPrivilegeEscalation is not false")
	}
}
