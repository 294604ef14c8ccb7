{{/* Names and labels shared by every template. */}}

{{- define "gatehouse.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release-scoped name: the release name, plus the chart name unless the release name contains it. */}}
{{- define "gatehouse.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "gatehouse.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "gatehouse.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "gatehouse.operatorSelectorLabels" -}}
app.kubernetes.io/name: {{ include "gatehouse.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "gatehouse.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (printf "%s-operator" (include "gatehouse.fullname" .)) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "gatehouse.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "gatehouse.runtimeImage" -}}
{{- $repo := default .Values.image.repository .Values.runtime.image.repository -}}
{{- $tag := default (default .Chart.AppVersion .Values.image.tag) .Values.runtime.image.tag -}}
{{- printf "%s:%s" $repo $tag -}}
{{- end -}}

{{/*
What the operator needs in every namespace it serves. It creates a Role per Agent that grants the
runtime (an MCPGateway's too) toolapprovals (+ status) and events; Kubernetes only lets it grant what it holds itself
(RBAC escalation prevention), so it holds those too. Secrets: get (it reads the Secrets Agents and ModelConfigs
reference by name) and create/patch (the Secrets it writes, <agent>-config and <agent>-access), never list or
watch (RBAC cannot narrow those by label: they would show it every Secret). No wildcards: tests/chart/test_rbac.py
checks.
*/}}
{{- define "gatehouse.operatorNamespacedRules" -}}
- apiGroups: [gatehouse.dev]
  resources: [agents, modelconfigs, remotemcpservers, mcpgateways]
  verbs: [get, list, watch, patch]
- apiGroups: [gatehouse.dev]
  resources: [agents/status, mcpgateways/status]
  verbs: [get, patch, update]
- apiGroups: [gatehouse.dev]
  resources: [toolapprovals]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [gatehouse.dev]
  resources: [toolapprovals/status]
  verbs: [get, patch, update]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, create, patch]
# an Agent's state claim (<agent>-state): read by name, created, grown; listed and watched, since nothing else tells
# when one binds (StateReady); deleted only by the garbage collector
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [get, list, watch, create, patch]
- apiGroups: [""]
  resources: [serviceaccounts, services]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [get, list, watch, create, patch, delete]
{{- if .Values.networkPolicy.enabled }}
# each runtime's NetworkPolicy <agent> (networkPolicy.enabled): created and patched; deleted with its owner by the
# garbage collector
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, create, patch]
{{- end }}
{{- end -}}
