{{/* Name of the chart, or nameOverride. */}}
{{- define "sidecar-terminator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified name. A release called "sidecar-terminator" (the documented
install) gives plain "sidecar-terminator", so the kustomize base rendered from
this chart carries the same names as a Helm install.
*/}}
{{- define "sidecar-terminator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "sidecar-terminator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels: stable across upgrades (a Deployment's selector is immutable). */}}
{{- define "sidecar-terminator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sidecar-terminator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "sidecar-terminator.labels" -}}
helm.sh/chart: {{ include "sidecar-terminator.chart" . }}
{{ include "sidecar-terminator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: controller
app.kubernetes.io/part-of: sidecar-terminator
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "sidecar-terminator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "sidecar-terminator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "sidecar-terminator.image" -}}
{{- $repo := .Values.image.repository }}
{{- with .Values.image.registry }}
{{- /* The registry host of repository (a first part with a dot or a colon, or localhost) gives way to image.registry. */}}
{{- $parts := splitList "/" $repo }}
{{- $first := first $parts }}
{{- if and (gt (len $parts) 1) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) }}
{{- $repo = join "/" (rest $parts) }}
{{- end }}
{{- $repo = printf "%s/%s" (trimSuffix "/" .) $repo }}
{{- end }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repo .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The native-sidecar webhook's flags (templates/nativesidecars.yaml).
*/}}
{{- define "sidecar-terminator.nativeSidecarsArgs" -}}
{{- if .Values.nativeSidecars.enabled -}}
{{- $fullname := include "sidecar-terminator.fullname" . -}}
- --native-sidecars-bind-address=:{{ .Values.nativeSidecars.port }}
- --native-sidecars-webhook-config={{ $fullname }}
- --native-sidecars-service={{ $fullname }}-webhook
- --native-sidecars-cert-secret={{ $fullname }}-webhook-tls
- --native-sidecars-allow-annotated={{ .Values.nativeSidecars.allowAnnotated }}
{{- if .Values.nativeSidecars.certManager.enabled }}
- --native-sidecars-cert-dir=/etc/sidecar-terminator/webhook-tls
{{- end }}
{{- end -}}
{{- end }}
