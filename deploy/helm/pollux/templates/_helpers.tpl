{{/*
The release's name prefix of every object: the release name, with
"-pollux" unless the release name already says pollux.
*/}}
{{- define "pollux.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object. */}}
{{- define "pollux.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ default .Chart.AppVersion .Values.image.tag | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: pollux
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The labels that select one service's pods: (dict "root" $ "component" "ingest"). */}}
{{- define "pollux.selectorLabels" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The image: the repository at the tag, by default the chart's appVersion. */}}
{{- define "pollux.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
One service's Deployment and PodDisruptionBudget:
(dict "root" $ "component" "ingest" "metricsPort" 9101 "replicas" true).
The metrics port is the binary's default (cmd/<service>/main.go); the
webhook receiver also listens on 8080.
*/}}
{{- define "pollux.deployment" -}}
{{- $root := .root -}}
{{- $v := index $root.Values .component -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "pollux.fullname" $root }}-{{ .component }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "pollux.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  {{- if .replicas }}
  replicas: {{ $v.replicas }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "pollux.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "pollux.selectorLabels" . | nindent 8 }}
      annotations:
        prometheus.io/scrape: "true"
        prometheus.io/port: {{ .metricsPort | quote }}
        prometheus.io/path: /metrics
        # A changed config restarts the pods.
        checksum/config: {{ $root.Values.config | sha256sum }}
        {{- with $root.Values.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      terminationGracePeriodSeconds: {{ $root.Values.terminationGracePeriodSeconds }}
      automountServiceAccountToken: false
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        seccompProfile: {type: RuntimeDefault}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- range . }}
        - name: {{ . }}
        {{- end }}
      {{- end }}
      containers:
        - name: {{ .component }}
          image: {{ include "pollux.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args: [{{ .component | quote }}]
          env:
            - name: POLLUX_CONFIG
              value: /etc/pollux/pollux.yaml
            - name: POLLUX_METRICS_ADDR
              value: ":{{ .metricsPort }}"
            - name: POLLUX_LOG_LEVEL
              value: {{ $root.Values.logLevel | quote }}
            - name: POLLUX_LOG_FORMAT
              value: {{ $root.Values.logFormat | quote }}
            {{- if $root.Values.nats.passwordSecret }}
            # Its own NATS user (deploy/nats/accounts.conf), in the URL so
            # that the three Deployments share one config file.
            - name: NATS_PASSWORD
              valueFrom:
                secretKeyRef: {name: {{ $root.Values.nats.passwordSecret }}, key: {{ .component }}-password}
            - name: POLLUX_NATS_URL
              value: {{ regexReplaceAll "://" (required "nats.url is required" $root.Values.nats.url) (printf "://%s:$(NATS_PASSWORD)@" .component) | quote }}
            {{- else }}
            - name: POLLUX_NATS_URL
              value: {{ required "nats.url is required" $root.Values.nats.url | quote }}
            {{- end }}
            {{- if eq .component "webhook" }}
            - name: POLLUX_WEBHOOK_ADDR
              value: ":8080"
            {{- end }}
          {{- with $root.Values.providersSecret }}
          # Provider tokens and webhook secrets, named by pollux.yaml.
          envFrom:
            - secretRef: {name: {{ . }}}
          {{- end }}
          ports:
            - {name: metrics, containerPort: {{ .metricsPort }}}
            {{- if eq .component "webhook" }}
            - {name: http, containerPort: 8080}
            {{- end }}
          # /healthz: the process runs. /readyz: it is connected to NATS.
          # The endpoint starts once the streams are set up (up to 30 s).
          startupProbe:
            httpGet: {path: /healthz, port: metrics}
            periodSeconds: 2
            failureThreshold: 30
          livenessProbe:
            httpGet: {path: /healthz, port: metrics}
            periodSeconds: 10
            failureThreshold: 3
          readinessProbe:
            httpGet: {path: /readyz, port: metrics}
            periodSeconds: 5
            failureThreshold: 2
          resources:
            {{- toYaml $v.resources | nindent 12 }}
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities: {drop: [ALL]}
          volumeMounts:
            - {name: config, mountPath: /etc/pollux, readOnly: true}
      volumes:
        - name: config
          configMap: {name: {{ include "pollux.fullname" $root }}-config}
      {{- with $root.Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- if $root.Values.podDisruptionBudget.enabled }}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "pollux.fullname" $root }}-{{ .component }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "pollux.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  minAvailable: {{ $root.Values.podDisruptionBudget.minAvailable }}
  selector:
    matchLabels:
      {{- include "pollux.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end -}}
