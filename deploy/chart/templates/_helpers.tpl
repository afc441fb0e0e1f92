{{/* Labels of every object of the release (Helm's recommended set). */}}
{{- define "muster.labels" -}}
{{ include "muster.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The labels that select muster's pods. */}}
{{- define "muster.selectorLabels" -}}
app.kubernetes.io/name: muster
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "muster.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The principal muster acts as; its own requests skip the webhook. */}}
{{- define "muster.user" -}}
system:serviceaccount:{{ .Release.Namespace }}:muster
{{- end }}

{{/* Where the API server calls the webhook: (list $ PATH). */}}
{{- define "muster.webhookClientConfig" -}}
{{- $root := index . 0 -}}
{{- $path := index . 1 -}}
{{- if $root.Values.webhook.url -}}
url: {{ printf "%s%s" (trimSuffix "/" $root.Values.webhook.url) $path | quote }}
{{- else -}}
service:
  name: muster-webhook
  namespace: {{ $root.Release.Namespace }}
  path: {{ $path }}
  port: 443
{{- end }}
{{- end }}

{{/* Annotations of the webhook registration: cert-manager's CA injection when it makes the certificate. */}}
{{- define "muster.webhookAnnotations" -}}
{{- if eq .Values.webhook.certificate "certManager" -}}
cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/muster-webhook
{{- end }}
{{- end }}

{{/* The hosts the serving certificate is for: the URL's host, or the Service's names. */}}
{{- define "muster.webhookHosts" -}}
{{- if .Values.webhook.url -}}
- {{ (urlParse .Values.webhook.url).hostname | quote }}
{{- else -}}
- muster-webhook.{{ .Release.Namespace }}.svc
- muster-webhook.{{ .Release.Namespace }}.svc.cluster.local
- muster-webhook.{{ .Release.Namespace }}
{{- end }}
{{- end }}

{{/* Refuses values that cannot work, naming the value and the fix. */}}
{{- define "muster.checkValues" -}}
{{- if not (has .Values.store.kind (list "sqlite" "postgres")) -}}
{{- fail (printf "store.kind %q: use sqlite or postgres" .Values.store.kind) -}}
{{- end -}}
{{- if and (eq .Values.store.kind "sqlite") (gt (int .Values.replicaCount) 1) -}}
{{- fail (printf "replicaCount %d needs store.kind postgres: SQLite is one file on one volume (set replicaCount 1, or store.kind postgres with store.postgres.secretName)" (int .Values.replicaCount)) -}}
{{- end -}}
{{- if not (has .Values.webhook.certificate (list "muster" "certManager")) -}}
{{- fail (printf "webhook.certificate %q: use muster or certManager" .Values.webhook.certificate) -}}
{{- end -}}
{{- if and .Values.webhook.url (not (hasPrefix "https://" .Values.webhook.url)) -}}
{{- fail (printf "webhook.url %q: the API server calls webhooks over HTTPS only; use https://HOST:PORT, or leave it empty for the Service" .Values.webhook.url) -}}
{{- end -}}
{{- end }}

{{/* Every container: no privilege, no writes outside its volumes. */}}
{{- define "muster.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities: {drop: [ALL]}
{{- end }}
