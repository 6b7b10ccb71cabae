/**
 * Tracing, configured as every OpenTelemetry SDK is: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used
 * as is) or `OTEL_EXPORTER_OTLP_ENDPOINT` (plus `/v1/traces`), `OTEL_SERVICE_NAME`, and the
 * headers and protocol variables. With none of the first three set, tracing is off: the Layer is
 * empty, no OpenTelemetry module is loaded and nothing is sent. Spans go over OTLP/HTTP, JSON
 * unless the protocol says protobuf, through @effect/opentelemetry's exporter (no OpenTelemetry
 * SDK), and the last batch is sent when the Layer's scope closes, before rx exits.
 */
import { Effect, Either, Layer, Option, Schema } from "effect"

/** The environment variables, as `process.env` holds them. */
export type Env = Readonly<Record<string, string | undefined>>

/** Where and how spans are sent. */
export interface Settings {
  readonly url: string
  readonly serviceName: string
  /** `OTEL_SERVICE_VERSION`; rx's own version otherwise. */
  readonly serviceVersion: string | undefined
  readonly headers: Readonly<Record<string, string>>
  readonly protocol: "http/json" | "http/protobuf"
}

/** The OpenTelemetry variables ask for something rx cannot do; the message names the variable. */
export class InvalidTelemetryConfig extends Schema.TaggedError<InvalidTelemetryConfig>()("@rx/cli/InvalidTelemetryConfig", {
  message: Schema.String
}) {}

/** Tracing is configured but @effect/opentelemetry cannot be loaded (an install without it). */
export class TelemetryUnavailable extends Schema.TaggedError<TelemetryUnavailable>()("@rx/cli/TelemetryUnavailable", {
  message: Schema.String
}) {}

/** The variables that turn tracing on. */
export const switches = ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SERVICE_NAME"] as const

/** The OTLP/HTTP port on this machine, as the specification's default endpoint. */
const defaultEndpoint = "http://localhost:4318"

const value = (env: Env, name: string): string | undefined => {
  const text = env[name]?.trim()
  return text === undefined || text === "" ? undefined : text
}

const invalid = (message: string) => Either.left(new InvalidTelemetryConfig({ message }))

const isHttpUrl = (text: string) =>
  Either.match(Either.try(() => new URL(text)), {
    onLeft: () => false,
    onRight: (url) => url.protocol === "http:" || url.protocol === "https:"
  })

/** `key=value,key2=value2`, values percent-encoded, as the specification writes headers. */
const parseHeaders = (name: string, text: string): Either.Either<Record<string, string>, InvalidTelemetryConfig> => {
  const headers: Record<string, string> = {}
  for (const pair of text.split(",")) {
    if (pair.trim() === "") continue
    const at = pair.indexOf("=")
    const key = at < 0 ? "" : pair.slice(0, at).trim()
    const decoded = Either.try(() => decodeURIComponent(pair.slice(at + 1).trim()))
    if (key === "" || Either.isLeft(decoded)) return invalid(`${name}: expected key=value pairs separated by commas, got ${JSON.stringify(pair.trim())}`)
    headers[key] = decoded.right
  }
  return Either.right(headers)
}

/** The service name: `OTEL_SERVICE_NAME`, else `service.name` in `OTEL_RESOURCE_ATTRIBUTES`, else `rx`. */
const serviceName = (env: Env): string => {
  const named = value(env, "OTEL_SERVICE_NAME")
  if (named !== undefined) return named
  const attribute = (value(env, "OTEL_RESOURCE_ATTRIBUTES") ?? "").split(",").map((pair) => pair.split("="))
    .find(([key]) => key?.trim() === "service.name")?.[1]?.trim()
  return attribute === undefined || attribute === "" ? "rx" : attribute
}

/**
 * What the environment asks for: `None` when tracing is off (none of `switches` set,
 * `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`).
 */
export const settings = (env: Env): Either.Either<Option.Option<Settings>, InvalidTelemetryConfig> => {
  if (switches.every((name) => value(env, name) === undefined)) return Either.right(Option.none())
  if (value(env, "OTEL_SDK_DISABLED")?.toLowerCase() === "true") return Either.right(Option.none())
  const exporters = (value(env, "OTEL_TRACES_EXPORTER") ?? "otlp").split(",").map((e) => e.trim())
  if (exporters.includes("none")) return Either.right(Option.none())
  const unsupported = exporters.filter((e) => e !== "otlp")
  if (unsupported.length > 0) {
    return invalid(`OTEL_TRACES_EXPORTER=${unsupported.join(",")} is not supported: rx exports traces over OTLP only (otlp, or none to turn tracing off)`)
  }

  const traces = value(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
  const base = value(env, "OTEL_EXPORTER_OTLP_ENDPOINT") ?? defaultEndpoint
  const url = traces ?? `${base.replace(/\/+$/, "")}/v1/traces`
  const from = traces !== undefined ? "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" : "OTEL_EXPORTER_OTLP_ENDPOINT"
  if (!isHttpUrl(url)) return invalid(`${from}: expected an http:// or https:// URL such as http://127.0.0.1:4318, got ${JSON.stringify(url)}`)

  const protocolFrom = value(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") === undefined ? "OTEL_EXPORTER_OTLP_PROTOCOL" : "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
  const protocol = value(env, protocolFrom) ?? "http/json"
  if (protocol !== "http/json" && protocol !== "http/protobuf") {
    return invalid(`${protocolFrom}=${protocol} is not supported: rx exports OTLP over HTTP (http/json, the default, or http/protobuf)`)
  }

  const common = parseHeaders("OTEL_EXPORTER_OTLP_HEADERS", value(env, "OTEL_EXPORTER_OTLP_HEADERS") ?? "")
  const specific = parseHeaders("OTEL_EXPORTER_OTLP_TRACES_HEADERS", value(env, "OTEL_EXPORTER_OTLP_TRACES_HEADERS") ?? "")
  if (Either.isLeft(common)) return Either.left(common.left)
  if (Either.isLeft(specific)) return Either.left(specific.left)

  return Either.right(Option.some({ url, serviceName: serviceName(env), serviceVersion: value(env, "OTEL_SERVICE_VERSION"), headers: { ...common.right, ...specific.right }, protocol }))
}

/** A Layer that sends the spans of everything it is provided to, as `settings` says; `serviceVersion` is rx's. */
export const exporter = (settings: Settings, serviceVersion: string): Layer.Layer<never, TelemetryUnavailable> =>
  Layer.unwrapEffect(
    Effect.tryPromise({
      try: () => Promise.all([import("@effect/opentelemetry/OtlpTracer"), import("@effect/opentelemetry/OtlpSerialization"), import("@effect/platform-node/NodeHttpClient")]),
      catch: (cause) =>
        new TelemetryUnavailable({
          message: `tracing is configured (${switches.join(", ")}) but @effect/opentelemetry cannot be loaded: install it, or unset those variables [${String(cause)}]`
        })
    }).pipe(
      Effect.map(([OtlpTracer, OtlpSerialization, NodeHttpClient]) =>
        OtlpTracer.layer({
          url: settings.url,
          resource: { serviceName: settings.serviceName, serviceVersion: settings.serviceVersion ?? serviceVersion },
          headers: settings.headers
        }).pipe(
          Layer.provide(settings.protocol === "http/json" ? OtlpSerialization.layerJson : OtlpSerialization.layerProtobuf),
          Layer.provide(NodeHttpClient.layerUndici)
        )
      )
    )
  )

/** Tracing as the environment asks: `Layer.empty` when it is off, nothing loaded. */
export const layer = (env: Env, serviceVersion: string): Layer.Layer<never, InvalidTelemetryConfig | TelemetryUnavailable> =>
  Either.match(settings(env), {
    onLeft: (error) => Layer.fail(error),
    onRight: Option.match({ onNone: () => Layer.empty, onSome: (s) => exporter(s, serviceVersion) })
  })
