/**
 * Tracing: the OTEL_ variables, and the spans of a scripted run as an OTLP/HTTP receiver on
 * 127.0.0.1 gets them (JSON), in process and from the `rx` binary; without the variables, rx
 * loads no OpenTelemetry module and connects to nothing but the model server.
 */
import { describe, expect, it } from "@effect/vitest"
import { LanguageModel, Runner, StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { OpenAiCompatible } from "@rx/llm"
import { Effect, Either, Layer, Option, Schema } from "effect"
import { spawn } from "node:child_process"
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import * as Telemetry from "../src/internal/telemetry.js"
import { jsonLines, type Ran, rx, sandbox, start, until } from "./helpers.js"

// ---------------------------------------------------------------------------------------------
// An OTLP/HTTP receiver (JSON), and the spans it got

const AnyValue: Schema.Schema<AnyValue> = Schema.Struct({
  stringValue: Schema.optional(Schema.String),
  intValue: Schema.optional(Schema.Union(Schema.Number, Schema.String)),
  doubleValue: Schema.optional(Schema.Number),
  boolValue: Schema.optional(Schema.Boolean),
  arrayValue: Schema.optional(Schema.Struct({ values: Schema.Array(Schema.suspend(() => AnyValue)) }))
})
interface AnyValue {
  readonly stringValue?: string | undefined
  readonly intValue?: number | string | undefined
  readonly doubleValue?: number | undefined
  readonly boolValue?: boolean | undefined
  readonly arrayValue?: { readonly values: ReadonlyArray<AnyValue> } | undefined
}
const Attributes = Schema.Array(Schema.Struct({ key: Schema.String, value: AnyValue }))

/** The part of an `ExportTraceServiceRequest` these tests read. */
const ExportTraceServiceRequest = Schema.Struct({
  resourceSpans: Schema.Array(Schema.Struct({
    resource: Schema.Struct({ attributes: Attributes }),
    scopeSpans: Schema.Array(Schema.Struct({
      spans: Schema.Array(Schema.Struct({
        traceId: Schema.String,
        spanId: Schema.String,
        parentSpanId: Schema.optional(Schema.String),
        name: Schema.String,
        kind: Schema.Number,
        attributes: Attributes,
        events: Schema.Array(Schema.Struct({ name: Schema.String, attributes: Attributes })),
        status: Schema.Struct({ code: Schema.Number, message: Schema.optional(Schema.String) })
      }))
    }))
  }))
})

const plain = (value: AnyValue): unknown =>
  value.stringValue ?? (value.intValue !== undefined ? Number(value.intValue) : undefined) ?? value.doubleValue ?? value.boolValue ??
    value.arrayValue?.values.map(plain)
const record = (attributes: typeof Attributes.Type) => Object.fromEntries(attributes.map((a) => [a.key, plain(a.value)]))

interface Span {
  readonly traceId: string
  readonly spanId: string
  readonly parent: string | undefined
  readonly name: string
  readonly kind: number
  readonly attributes: Record<string, unknown>
  readonly events: ReadonlyArray<{ readonly name: string; readonly attributes: Record<string, unknown> }>
  readonly status: { readonly code: number; readonly message?: string | undefined }
  readonly resource: Record<string, unknown>
}

interface Export {
  readonly path: string
  readonly contentType: string
  readonly body: typeof ExportTraceServiceRequest.Type
}

/** A receiver on 127.0.0.1: every POST's body decoded, and each connection counted. Closed with the scope. */
const receiver = Effect.acquireRelease(
  Effect.async<{ readonly url: string; readonly exports: Array<Export>; readonly problems: Array<string>; readonly connections: () => number; readonly server: Http.Server }>((resume) => {
    const exports: Array<Export> = []
    const problems: Array<string> = []
    let connections = 0
    const server = Http.createServer((req, res) => {
      let body = ""
      req.on("data", (chunk: Buffer) => (body += chunk.toString()))
      req.on("end", () => {
        const decoded = Schema.decodeUnknownEither(Schema.parseJson(ExportTraceServiceRequest))(body)
        if (Either.isRight(decoded)) exports.push({ path: req.url ?? "", contentType: req.headers["content-type"] ?? "", body: decoded.right })
        else problems.push(`${req.method} ${req.url} ${req.headers["content-type"]}: ${decoded.left.message}`)
        res.writeHead(200, { "content-type": "application/json" })
        res.end("{}")
      })
    })
    server.on("connection", () => connections++)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as AddressInfo
      resume(Effect.succeed({ url: `http://127.0.0.1:${port}`, exports, problems, connections: () => connections, server }))
    })
  }),
  ({ server }) => Effect.async<void>((resume) => {
    server.close(() => resume(Effect.void))
  })
)

const spansOf = (exports: ReadonlyArray<Export>): ReadonlyArray<Span> =>
  exports.flatMap((e) =>
    e.body.resourceSpans.flatMap((rs) =>
      rs.scopeSpans.flatMap((ss) =>
        ss.spans.map((s) => ({
          traceId: s.traceId,
          spanId: s.spanId,
          parent: s.parentSpanId === "" ? undefined : s.parentSpanId,
          name: s.name,
          kind: s.kind,
          attributes: record(s.attributes),
          events: s.events.map((ev) => ({ name: ev.name, attributes: record(ev.attributes) })),
          status: s.status,
          resource: record(rs.resource.attributes)
        }))
      )
    )
  )

const OK = 1
const ERROR = 2
const CLIENT = 3

/**
 * The structure every scripted run here must show: a goal span (the trace's root) > one span per
 * iteration > its model call (GenAI attributes) and tool calls; the goal id on every span, and
 * the termination reason on the goal's.
 */
const checkTrace = (
  spans: ReadonlyArray<Span>,
  goalId: string,
  expected: { readonly iterations: number; readonly tools: ReadonlyArray<string>; readonly model: string; readonly others?: (span: Span) => boolean }
) => {
  const goal = spans.filter((s) => s.name === "rx.goal")
  expect(goal).toHaveLength(1)
  const root = goal[0] as Span
  expect(root.parent).toBeUndefined()
  expect(root.attributes).toMatchObject({ "rx.goal_id": goalId, "rx.status": "terminated", "rx.reason": "done", "rx.iterations": expected.iterations })
  expect(root.events.map((e) => e.name)).toContain("Terminated")
  expect(root.status.code).toBe(OK)

  const iterations = spans.filter((s) => s.name === "rx.iteration").sort((a, b) => Number(a.attributes["rx.iteration"]) - Number(b.attributes["rx.iteration"]))
  expect(iterations.map((s) => s.attributes["rx.iteration"])).toEqual(Array.from({ length: expected.iterations }, (_, i) => i + 1))
  for (const span of iterations) expect(span.parent).toBe(root.spanId)

  const chats = spans.filter((s) => s.name === "chat")
  expect(chats).toHaveLength(expected.iterations)
  for (const [i, iteration] of iterations.entries()) {
    const chat = chats.filter((s) => s.parent === iteration.spanId)
    expect(chat, `the model call of iteration ${i + 1}`).toHaveLength(1)
    expect(chat[0]?.kind).toBe(CLIENT)
    expect(chat[0]?.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "openai",
      "gen_ai.request.model": expected.model,
      "gen_ai.response.model": "fake-model",
      "gen_ai.usage.input_tokens": 11,
      "gen_ai.usage.output_tokens": 7,
      "server.address": "127.0.0.1",
      "rx.iteration": i + 1,
      "rx.seq": iteration.attributes["rx.seq"]
    })
  }
  const tools = spans.filter((s) => s.name.startsWith("execute_tool "))
  expect(tools.map((s) => s.name)).toEqual(expected.tools.map((t) => `execute_tool ${t}`))
  for (const tool of tools) {
    const parent = iterations.find((s) => s.spanId === tool.parent)
    expect(parent, tool.name).toBeDefined()
    expect(tool.attributes["rx.iteration"]).toBe(parent?.attributes["rx.iteration"])
    expect(tool.attributes["gen_ai.tool.call.id"]).toMatch(new RegExp(`^${goalId}:`))
    expect(tool.status.code).toBe(OK)
  }

  // Every span of the goal's trace, the HTTP client's too, carries its id, iteration and seq.
  const trace = spans.filter((s) => s.traceId === root.traceId)
  for (const span of trace) {
    expect(span.attributes["rx.goal_id"], span.name).toBe(goalId)
    expect(typeof span.attributes["rx.iteration"], span.name).toBe("number")
    expect(typeof span.attributes["rx.seq"], span.name).toBe("number")
  }
  // Outside it, only what `others` allows (the SQLite store creating its tables, before any goal).
  const outside = spans.filter((s) => s.traceId !== root.traceId)
  expect(outside.filter((s) => !(expected.others ?? (() => false))(s)).map((s) => s.name)).toEqual([])
  return { root, iterations, chats, tools }
}

// ---------------------------------------------------------------------------------------------
// The scripted run

const call = (name: string, args: unknown) => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }] })
const done = (summary: string) => call("done", { summary })

/** Every OTEL_ variable of this process removed, so that a child sees only those a test gives. */
const noOtel: Record<string, undefined> = Object.fromEntries(
  [...Object.keys(process.env).filter((k) => k.startsWith("OTEL_")), ...Telemetry.switches].map((k) => [k, undefined])
)

const at = (box: ReturnType<typeof sandbox>, server: FakeServer.FakeServer) =>
  ["--db", box.db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "fake", "--sandbox", "none", "--json"]

/**
 * A span of the SQLite store creating or migrating its tables when it opens a new database (no goal
 * yet): the schema, the migrations' table, and the migrations' looks for open goals and forks to fill in.
 */
const migration = (span: Span) =>
  span.name.startsWith("sql.") && span.attributes["rx.goal_id"] === undefined &&
  (span.attributes["db.query.text"] === undefined ||
    /rx_migrations|^CREATE |^ALTER |^SELECT goal_id FROM goals WHERE status = 'open'$|^SELECT goal_id FROM events WHERE seq = 0 AND tag = 'GoalSubmitted'/.test(String(span.attributes["db.query.text"])))

const goalOf = (stdout: string) => String(jsonLines(stdout)[0]?.["goalId"])

/**
 * A module for `NODE_OPTIONS=--import`: it writes each TCP connection's port, and each module URL
 * the process resolves, to the files its environment names.
 */
const spy = (() => {
  const dir = mkdtempSync(join(tmpdir(), "rx-spy-"))
  const hooks = join(dir, "hooks.mjs")
  writeFileSync(
    hooks,
    [
      `import { appendFileSync } from "node:fs"`,
      `let file`,
      `export async function initialize(data) { file = data.file }`,
      `export async function resolve(specifier, context, next) {`,
      `  const resolved = await next(specifier, context)`,
      `  appendFileSync(file, resolved.url + "\\n")`,
      `  return resolved`,
      `}`
    ].join("\n")
  )
  const preload = join(dir, "spy.mjs")
  writeFileSync(
    preload,
    [
      `import { appendFileSync } from "node:fs"`,
      `import { register } from "node:module"`,
      `import net from "node:net"`,
      `register(${JSON.stringify(`file://${hooks}`)}, { data: { file: process.env.RX_SPY_MODULES } })`,
      `const connect = net.Socket.prototype.connect`,
      `net.Socket.prototype.connect = function (...args) {`,
      `  const target = Array.isArray(args[0]) ? args[0][0] : args[0]`,
      `  appendFileSync(process.env.RX_SPY_CONNECTIONS, String(typeof target === "object" && target !== null ? target.port ?? target.path : target) + "\\n")`,
      `  return connect.apply(this, args)`,
      `}`
    ].join("\n")
  )
  return { dir, preload }
})()

/** The environment that makes a child process report its connections and modules, and where to read them. */
const spied = (name: string) => {
  const connections = join(spy.dir, `${name}.connections`)
  const modules = join(spy.dir, `${name}.modules`)
  writeFileSync(connections, "")
  writeFileSync(modules, "")
  const read = (file: string) => readFileSync(file, "utf8").split("\n").filter((line) => line !== "")
  return {
    env: { NODE_OPTIONS: `--import ${spy.preload}`, RX_SPY_CONNECTIONS: connections, RX_SPY_MODULES: modules },
    ports: () => read(connections),
    modules: () => read(modules)
  }
}

const port = (url: string) => new URL(url).port

/** Modules of @effect/opentelemetry among those a process resolved. */
const openTelemetryModules = (modules: ReadonlyArray<string>) => modules.filter((url) => /@effect[/+]opentelemetry/.test(url))

// ---------------------------------------------------------------------------------------------

describe("the OTEL_ variables", () => {
  const on = (env: Telemetry.Env) => Either.getOrThrow(Telemetry.settings(env))

  it("none of OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME: off, and the Layer is empty", () => {
    expect(on({})).toEqual(Option.none())
    expect(on({ OTEL_EXPORTER_OTLP_ENDPOINT: "", OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf", OTEL_RESOURCE_ATTRIBUTES: "a=b" })).toEqual(Option.none())
    expect(Telemetry.layer({ OTEL_EXPORTER_OTLP_HEADERS: "a=b" }, "1.0.0")).toBe(Layer.empty)
  })

  it("the traces endpoint is used as is; the general one gets /v1/traces; the service name defaults to rx", () => {
    expect(on({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318/", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://collector:9999/custom" })).toEqual(
      Option.some({ url: "http://collector:9999/custom", serviceName: "rx", serviceVersion: undefined, headers: {}, protocol: "http/json" })
    )
    expect(Option.map(on({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318/" }), (s) => s.url)).toEqual(Option.some("http://127.0.0.1:4318/v1/traces"))
    expect(Option.map(on({ OTEL_EXPORTER_OTLP_ENDPOINT: "https://otel.example/base" }), (s) => s.url)).toEqual(Option.some("https://otel.example/base/v1/traces"))
    // The service name alone turns tracing on, to the specification's local default.
    expect(on({ OTEL_SERVICE_NAME: "agent", OTEL_SERVICE_VERSION: "7", OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf" })).toEqual(
      Option.some({ url: "http://localhost:4318/v1/traces", serviceName: "agent", serviceVersion: "7", headers: {}, protocol: "http/protobuf" })
    )
    expect(Option.map(on({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://h:1", OTEL_RESOURCE_ATTRIBUTES: "team=x, service.name = from-attributes" }), (s) => s.serviceName))
      .toEqual(Option.some("from-attributes"))
  })

  it("headers, percent-encoded; the traces variables win over the general ones", () => {
    const s = on({
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://h:1",
      OTEL_EXPORTER_OTLP_HEADERS: "authorization=Bearer%20abc, x-team = one",
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: "x-team=two",
      OTEL_EXPORTER_OTLP_PROTOCOL: "grpc",
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/protobuf"
    })
    expect(Option.map(s, (x) => [x.headers, x.protocol])).toEqual(Option.some([{ authorization: "Bearer abc", "x-team": "two" }, "http/protobuf"]))
  })

  it("turned off by OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none", () => {
    expect(on({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://h:1", OTEL_SDK_DISABLED: "TRUE" })).toEqual(Option.none())
    expect(on({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://h:1", OTEL_TRACES_EXPORTER: "none" })).toEqual(Option.none())
  })

  it("what rx cannot do is one line naming the variable", () => {
    const problem = (env: Telemetry.Env) => Either.match(Telemetry.settings(env), { onLeft: (e) => e.message, onRight: () => "accepted" })
    expect(problem({ OTEL_EXPORTER_OTLP_ENDPOINT: "127.0.0.1:4318" })).toMatch(/^OTEL_EXPORTER_OTLP_ENDPOINT: expected an http:\/\/ or https:\/\/ URL/)
    expect(problem({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "grpc://h:4317" })).toMatch(/^OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: /)
    expect(problem({ OTEL_SERVICE_NAME: "x", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).toMatch(/^OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported/)
    expect(problem({ OTEL_SERVICE_NAME: "x", OTEL_TRACES_EXPORTER: "console" })).toMatch(/^OTEL_TRACES_EXPORTER=console is not supported/)
    expect(problem({ OTEL_SERVICE_NAME: "x", OTEL_EXPORTER_OTLP_HEADERS: "novalue" })).toMatch(/^OTEL_EXPORTER_OTLP_HEADERS: expected key=value/)
  })
})

describe("spans over OTLP/HTTP", () => {
  it.scopedLive("in process: a scripted run's spans reach the receiver as JSON once the Layer's scope closes", () =>
    Effect.gen(function*() {
      const otlp = yield* receiver
      const model = yield* FakeServer.make([call("echo", { text: "one" }), call("echo", { text: "two" }), done("echoed twice")])
      const env = { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_SERVICE_NAME: "rx-test" }
      const result = yield* Runner.run({ goal: "echo twice", goalId: "gtrace" }).pipe(
        Effect.provide(Layer.mergeAll(
          StateStore.layerMemory,
          ToolRegistry.layer([Tool.echo]),
          OpenAiCompatible.layerNode({ baseUrl: model.baseUrl, model: "fake" })
        )),
        Effect.provide(Telemetry.layer(env, "0.0.0-test"))
      )
      expect(result).toMatchObject({ status: "terminated", reason: "done", iterations: 3 })
      expect(otlp.problems).toEqual([])
      expect(otlp.exports.length).toBeGreaterThan(0)
      for (const e of otlp.exports) expect([e.path, e.contentType]).toEqual(["/v1/traces", "application/json"])
      const spans = spansOf(otlp.exports)
      expect(spans[0]?.resource).toMatchObject({ "service.name": "rx-test", "service.version": "0.0.0-test" })
      const { iterations, tools } = checkTrace(spans, "gtrace", { iterations: 3, tools: ["echo", "echo"], model: "fake" })
      expect(tools.map((t) => t.attributes["rx.seq"])).toEqual([2, 6])
      expect(iterations.map((s) => s.attributes["rx.seq"])).toEqual([1, 5, 9])
      // The model requests' own spans sit under the model call's.
      const http = spans.filter((s) => s.name.startsWith("http.client"))
      expect(http.length).toBe(3)
      for (const span of http) expect(spans.find((s) => s.spanId === span.parent)?.name).toBe("chat")
    }))

  it.scopedLive("in process: a goal that ends other than done, and a failed call, are errors with the reason", () =>
    Effect.gen(function*() {
      const otlp = yield* receiver
      const env = { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${otlp.url}/v1/traces` }
      const result = yield* Runner.run({ goal: "read a file that is not there", goalId: "gfail", options: { maxIterations: 1 } }).pipe(
        Effect.provide(Layer.mergeAll(
          StateStore.layerMemory,
          ToolRegistry.layer([Tool.echo]),
          LanguageModel.layerScripted([LanguageModel.callTool("echo", { wrong: true })])
        )),
        Effect.provide(Telemetry.layer(env, "0.0.0-test"))
      )
      expect(result.reason).toBe("max_iterations")
      const spans = spansOf(otlp.exports)
      const goal = spans.find((s) => s.name === "rx.goal")
      expect(goal?.status.code).toBe(ERROR)
      expect(goal?.status.message).toContain("max_iterations")
      expect(goal?.attributes).toMatchObject({ "rx.goal_id": "gfail", "rx.reason": "max_iterations", "rx.status": "terminated" })
      const terminated = goal?.events.find((e) => e.name === "Terminated")
      expect(terminated?.attributes).toMatchObject({ "rx.reason": "max_iterations" })
      // The invalid input was rejected before any call: the iteration's span says why.
      const iteration = spans.find((s) => s.name === "rx.iteration")
      expect(iteration?.events.find((e) => e.name === "ActionRejected")?.attributes).toMatchObject({ "rx.kind": "invalid_input" })
    }))

  it.scopedLive("rx run exports its spans to OTEL_EXPORTER_OTLP_ENDPOINT before it exits", () =>
    Effect.gen(function*() {
      const otlp = yield* receiver
      const model = yield* FakeServer.make([call("read_file", { path: "hello.txt" }), call("list_dir", {}), done("read and listed")])
      const box = sandbox()
      const ran = yield* rx(["run", "read and list", ...at(box, model)], { ...noOtel, OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url })
      expect(ran.stderr).toBe("")
      expect(ran.code).toBe(0)
      expect(otlp.problems).toEqual([])
      const spans = spansOf(otlp.exports)
      expect(spans[0]?.resource).toMatchObject({ "service.name": "rx" })
      checkTrace(spans, goalOf(ran.stdout), { iterations: 3, tools: ["read_file", "list_dir"], model: "fake", others: migration })
    }))

  it.scopedLive("rx resume and rx serve export too: a suspended run, its resume, and a goal run by the server", () =>
    Effect.gen(function*() {
      const otlp = yield* receiver
      const traced = { ...noOtel, OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url }
      const box = sandbox()
      const down = yield* FakeServer.freePort
      const first = yield* rx(["run", "list", "--db", box.db, "--workspace", box.workspace, "--base-url", `http://127.0.0.1:${down}/v1`, "--model", "fake", "--sandbox", "none", "--retries", "0", "--json"], traced)
      expect(first.code).toBe(11)
      const goalId = goalOf(first.stdout)
      const suspended = spansOf(otlp.exports).filter((s) => s.name === "rx.goal")
      expect(suspended.map((s) => [s.attributes["rx.goal_id"], s.attributes["rx.status"], s.attributes["rx.reason"], s.status.code])).toEqual([
        [goalId, "suspended", "model_unavailable", OK]
      ])
      expect(spansOf(otlp.exports).find((s) => s.name === "chat")?.status.code).toBe(ERROR)

      const model = yield* FakeServer.make([call("list_dir", {}), done("listed"), call("list_dir", {}), done("listed by the server")])
      otlp.exports.length = 0
      const resumed = yield* rx(["resume", goalId, "--db", box.db, "--base-url", model.baseUrl], traced)
      expect(resumed.code).toBe(0)
      const { root } = checkTrace(spansOf(otlp.exports), goalId, { iterations: 2, tools: ["list_dir"], model: "fake" })
      // The resumed run starts after the suspension and the recorded option change.
      expect(root.attributes["rx.seq"]).toBe(4)

      otlp.exports.length = 0
      const served = start(["serve", "--port", "0", "--db", box.db, "--workspace", box.workspace, "--base-url", model.baseUrl, "--model", "fake", "--sandbox", "none"], traced)
      yield* until(() => /listening on (http:\/\/\S+)/.test(served.output().stdout) || served.exitCode !== null, "rx serve to listen")
      const url = /listening on (http:\/\/\S+)/.exec(served.output().stdout)?.[1] ?? ""
      const token = readFileSync(join(box.root, "rx-server.token"), "utf8").trim()
      const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" }
      const submitted = yield* Effect.promise(() => fetch(`${url}/v1/goals`, { method: "POST", headers, body: JSON.stringify({ goal: "list" }) }))
      const { goalId: servedGoal } = (yield* Effect.promise(() => submitted.json())) as { goalId: string }
      const followed = yield* Effect.promise(() => fetch(`${url}/v1/goals/${servedGoal}/events`, { headers }).then((r) => r.text()))
      expect(jsonLines(followed).at(-1)).toMatchObject({ _tag: "Terminated", reason: "done" })
      served.kill("SIGTERM")
      expect((yield* Effect.promise(() => served.done)).code).toBe(0)
      // The server's own spans (its HTTP requests) are traces of their own; the goal's trace is as above.
      const spans = spansOf(otlp.exports)
      const goal = spans.find((s) => s.name === "rx.goal" && s.attributes["rx.goal_id"] === servedGoal)
      expect(goal).toBeDefined()
      checkTrace(spans.filter((s) => s.traceId === goal?.traceId), servedGoal, { iterations: 2, tools: ["list_dir"], model: "fake" })
    }), 60_000)

  it.scopedLive("without the variables rx connects to nothing but the model server, and loads no OpenTelemetry module", () =>
    Effect.gen(function*() {
      const otlp = yield* receiver
      const model = yield* FakeServer.make([call("list_dir", {}), done("listed"), call("list_dir", {}), done("listed"), call("list_dir", {}), done("listed")])
      // The shipped binary: only the model server's port.
      const bundled = spied("bundled")
      const ran = yield* rx(["run", "list", ...at(sandbox(), model)], { ...noOtel, ...bundled.env })
      expect(ran.code).toBe(0)
      expect(new Set(bundled.ports())).toEqual(new Set([port(model.baseUrl)]))

      // The unbundled program: no module of @effect/opentelemetry is even resolved.
      const bin = join(import.meta.dirname, "..", "dist", "src", "bin.js")
      const unbundled = spied("unbundled")
      const plain = yield* node([bin, "run", "list", ...at(sandbox(), model)], unbundled.env)
      expect(plain.code).toBe(0)
      expect(unbundled.modules().some((url) => url.includes("/@rx/") || url.includes("/packages/kernel/"))).toBe(true)
      expect(openTelemetryModules(unbundled.modules())).toEqual([])
      expect(new Set(unbundled.ports())).toEqual(new Set([port(model.baseUrl)]))

      // The same with the variable: the modules are loaded and the receiver gets the spans, so both checks can fail.
      const traced = spied("traced")
      const sent = yield* node([bin, "run", "list", ...at(sandbox(), model)], { ...traced.env, OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url })
      expect(sent.code).toBe(0)
      expect(openTelemetryModules(traced.modules()).length).toBeGreaterThan(0)
      expect(traced.ports()).toContain(port(otlp.url))
      expect(otlp.connections()).toBeGreaterThan(0)
      checkTrace(spansOf(otlp.exports), goalOf(sent.stdout), { iterations: 2, tools: ["list_dir"], model: "fake", others: migration })
    }))
})

/**
 * Run node with `args` to completion, without blocking this process (the fake servers in it go on
 * answering), in this process's environment less its OTEL_ and RX_ variables, plus `env`.
 */
const node = (args: ReadonlyArray<string>, env: Record<string, string>) =>
  Effect.promise(() =>
    new Promise<Ran>((resolve) => {
      const inherited = Object.entries(process.env).filter((e): e is [string, string] =>
        e[1] !== undefined && !e[0].startsWith("OTEL_") && !e[0].startsWith("RX_")
      )
      const child = spawn(process.execPath, [...args], {
        env: { ...Object.fromEntries(inherited), XDG_STATE_HOME: mkdtempSync(join(tmpdir(), "rx-state-")), ...env },
        stdio: ["ignore", "pipe", "pipe"]
      })
      let stdout = ""
      let stderr = ""
      child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
      child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
      child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }))
    })
  )
