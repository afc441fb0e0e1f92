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

{{/* The labels that select the webhook's pods (a Deployment of its own: none of them is the
controller's, whose Deployment selects by the labels above). */}}
{{- define "muster.webhookSelectorLabels" -}}
app.kubernetes.io/name: muster-webhook
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The pod spec's affinity: the values', or replicas spread over nodes. (list $ SELECTOR_LABELS) */}}
{{- define "muster.affinity" -}}
{{- $root := index . 0 -}}
{{- if $root.Values.affinity -}}
{{ toYaml $root.Values.affinity }}
{{- else -}}
podAntiAffinity:
  # Spread the replicas so that a node failure does not take them all.
  preferredDuringSchedulingIgnoredDuringExecution:
  - weight: 100
    podAffinityTerm:
      topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- index . 1 | nindent 10 }}
{{- end }}
{{- end }}

{{/* The init container that takes the webhook's certificate from the Secret muster-webhook-tls,
or makes it there, and writes it to the volume tls. */}}
{{- define "muster.webhookCertInit" -}}
- name: webhook-cert
  image: {{ include "muster.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  args:
  - webhook-cert
  - --namespace={{ .Release.Namespace }}
  - --secret=muster-webhook-tls
  {{- range (include "muster.webhookHosts" . | fromYamlArray) }}
  - --host={{ . }}
  {{- end }}
  - --out=/etc/muster/tls
  env:
  - {name: RUST_LOG, value: {{ .Values.logLevel | quote }}}
  resources:
    requests: {cpu: 10m, memory: 32Mi}
    limits: {memory: 128Mi}
  securityContext:
    {{- include "muster.containerSecurity" . | nindent 4 }}
  volumeMounts:
  - {name: tls, mountPath: /etc/muster/tls}
{{- end }}

{{/* The pod's security context. */}}
{{- define "muster.podSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile: {type: RuntimeDefault}
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
{{- if lt (int .Values.webhook.replicaCount) 1 -}}
{{- fail (printf "webhook.replicaCount %d: the webhook fails closed, so without a replica every managed Job and pod is refused; set 1 or more (2 keeps it up through upgrades and node failures)" (int .Values.webhook.replicaCount)) -}}
{{- end -}}
{{- range .Values.networkPolicy.podCIDRs -}}
{{- if not (regexMatch "^[0-9a-fA-F.:]+/[0-9]+$" .) -}}
{{- fail (printf "networkPolicy.podCIDRs: %q is not a CIDR; write it as 10.244.0.0/16 or fd00:10:244::/56" .) -}}
{{- end -}}
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
