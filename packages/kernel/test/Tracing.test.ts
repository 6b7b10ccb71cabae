import { describe, expect, it } from "@effect/vitest"
import { type Context, Effect, Exit, Option, Schema, Tracer } from "effect"
import { LanguageModel, Runner, Tool } from "@rx/kernel"
import { echo, flaky, layers } from "./fixtures.js"

const { callTool, done } = LanguageModel

/** A span as the test tracer keeps it. */
class TestSpan implements Tracer.Span {
  readonly _tag = "Span"
  readonly traceId = "trace"
  readonly sampled = true
  readonly attributes = new Map<string, unknown>()
  readonly events: Array<{ readonly name: string; readonly attributes: Record<string, unknown> }> = []
  readonly links: Array<Tracer.SpanLink>
  status: Tracer.SpanStatus
  constructor(
    readonly name: string,
    readonly spanId: string,
    readonly parent: Option.Option<Tracer.AnySpan>,
    readonly context: Context.Context<never>,
    links: ReadonlyArray<Tracer.SpanLink>,
    startTime: bigint,
    readonly kind: Tracer.SpanKind
  ) {
    this.links = [...links]
    this.status = { _tag: "Started", startTime }
  }
  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>) {
    if (this.status._tag === "Started") this.status = { _tag: "Ended", startTime: this.status.startTime, endTime, exit }
  }
  attribute(key: string, value: unknown) {
    this.attributes.set(key, value)
  }
  event(name: string, _startTime: bigint, attributes?: Record<string, unknown>) {
    this.events.push({ name, attributes: attributes ?? {} })
  }
  addLinks(links: ReadonlyArray<Tracer.SpanLink>) {
    this.links.push(...links)
  }
  get parentId() {
    return Option.match(this.parent, { onNone: () => undefined, onSome: (p) => p.spanId })
  }
  get exit() {
    return this.status._tag === "Ended" ? this.status.exit : undefined
  }
}

/** A tracer that keeps every span it makes. */
const collector = () => {
  const spans: Array<TestSpan> = []
  const tracer = Tracer.make({
    span: (name, parent, context, links, startTime, kind) => {
      const span = new TestSpan(name, `s${spans.length}`, parent, context, links, startTime, kind)
      spans.push(span)
      return span
    },
    context: (f) => f()
  })
  const named = (name: string) => spans.filter((s) => s.name === name)
  const one = (name: string) => {
    const found = named(name)
    expect(found, name).toHaveLength(1)
    return found[0] as TestSpan
  }
  return { spans, tracer, named, one }
}

/** A tool that makes a span of its own and reports the span that one is in. */
const probe = (seen: Array<Option.Option<string>>) =>
  Tool.make({
    name: "probe",
    description: "Reports the span its own span is in.",
    input: Schema.Struct({}),
    output: Schema.Struct({}),
    idempotent: true,
    execute: () =>
      Effect.option(Effect.currentSpan).pipe(
        Effect.tap((span) =>
          Effect.sync(() => seen.push(Option.flatMap(span, (s) => s.parent).pipe(Option.flatMap((p) => (p._tag === "Span" ? Option.some(p.name) : Option.none())))))
        ),
        Effect.as({}),
        Effect.withSpan("probe.inner")
      )
  })

describe("Runner: spans", () => {
  it.effect("a goal run > its iterations > each one's model call and tool calls, all with rx.goal_id, rx.iteration and rx.seq", () => {
    const c = collector()
    return Effect.gen(function*() {
      const result = yield* Runner.run({ goal: "say hi", goalId: "g1" }).pipe(Effect.withSpan("caller"), Effect.withTracer(c.tracer))
      expect(result).toMatchObject({ status: "terminated", reason: "done" })

      // The goal's span is its trace's root; the span the run started in is linked.
      const goal = c.one("rx.goal")
      expect(goal.parentId).toBeUndefined()
      expect(goal.links.map((l) => l.span.spanId)).toEqual([c.one("caller").spanId])
      expect(Object.fromEntries(goal.attributes)).toMatchObject({
        "rx.goal_id": "g1", "rx.seq": 1, "rx.iteration": 0, "rx.status": "terminated", "rx.reason": "done", "rx.detail": "said hi", "rx.iterations": 2
      })
      expect(goal.exit !== undefined && Exit.isSuccess(goal.exit)).toBe(true)
      expect(goal.events.map((e) => e.name)).toContain("Terminated")

      const iterations = c.named("rx.iteration")
      expect(iterations.map((s) => [s.attributes.get("rx.iteration"), s.attributes.get("rx.seq"), s.parentId])).toEqual([
        [1, 1, goal.spanId],
        [2, 5, goal.spanId]
      ])
      // Each iteration's span notes its events, and ends with IterationCompleted.
      expect(iterations[0]?.events.map((e) => [e.name, e.attributes["rx.seq"]])).toEqual([
        ["ModelResponded", 1], ["ToolStarted", 2], ["ToolSucceeded", 3], ["IterationCompleted", 4]
      ])
      for (const span of iterations) expect(span.status._tag).toBe("Ended")

      const chats = c.named("chat")
      expect(chats.map((s) => [s.parentId, s.attributes.get("rx.iteration"), s.attributes.get("rx.seq"), s.kind])).toEqual([
        [iterations[0]?.spanId, 1, 1, "client"],
        [iterations[1]?.spanId, 2, 5, "client"]
      ])
      expect(Object.fromEntries(chats[0]?.attributes ?? [])).toMatchObject({
        "gen_ai.operation.name": "chat",
        "gen_ai.usage.input_tokens": 0,
        "gen_ai.usage.output_tokens": 0,
        "gen_ai.response.finish_reasons": ["tool_calls"]
      })

      const tool = c.one("execute_tool echo")
      expect(tool.parentId).toBe(iterations[0]?.spanId)
      expect(Object.fromEntries(tool.attributes)).toMatchObject({
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "echo", "gen_ai.tool.call.id": "g1:1", "rx.iteration": 1, "rx.seq": 2
      })
      expect(tool.exit !== undefined && Exit.isSuccess(tool.exit)).toBe(true)

      for (const span of c.spans.filter((s) => s.name !== "caller")) {
        expect(span.attributes.get("rx.goal_id"), span.name).toBe("g1")
        expect(typeof span.attributes.get("rx.iteration"), span.name).toBe("number")
        expect(typeof span.attributes.get("rx.seq"), span.name).toBe("number")
        expect(span.status._tag, span.name).toBe("Ended")
      }
    }).pipe(Effect.provide(layers([callTool("echo", { text: "hi" }), done("said hi")])))
  })

  it.effect("a failed call and a goal that ends other than done are errors; spans made inside a tool carry the rx attributes", () => {
    const c = collector()
    const seen: Array<Option.Option<string>> = []
    return Effect.gen(function*() {
      const result = yield* Runner.run({ goal: "break", goalId: "g2" }).pipe(Effect.withTracer(c.tracer))
      expect(result.reason).toBe("fatal_error")

      const goal = c.one("rx.goal")
      expect(goal.attributes.get("rx.reason")).toBe("fatal_error")
      const exit = goal.exit
      expect(exit !== undefined && Exit.isFailure(exit)).toBe(true)
      expect(String(exit !== undefined && Exit.isFailure(exit) ? exit.cause : "")).toContain("fatal_error")

      const failed = c.one("execute_tool flaky")
      expect(failed.attributes.get("error.type")).toBe("fatal")
      expect(failed.exit !== undefined && Exit.isFailure(failed.exit)).toBe(true)

      // The probe ran in its own tool span; its inner span inherits the rx attributes.
      expect(seen).toEqual([Option.some("execute_tool probe")])
      const inner = c.one("probe.inner")
      expect(inner.parentId).toBe(c.one("execute_tool probe").spanId)
      expect(Object.fromEntries(inner.attributes)).toMatchObject({ "rx.goal_id": "g2", "rx.iteration": 1, "rx.seq": 2 })
    }).pipe(Effect.provide(layers([callTool("probe", {}), callTool("flaky", { fatal: true })], [echo, flaky, probe(seen)])))
  })

  it.effect("a model failure makes the model call's span an error", () => {
    const c = collector()
    return Effect.gen(function*() {
      const result = yield* Runner.run({ goal: "no model", goalId: "g3" }).pipe(Effect.withTracer(c.tracer))
      expect(result.reason).toBe("fatal_error")
      const chat = c.one("chat")
      expect(chat.attributes.get("error.type")).toBe("ModelError")
      expect(chat.exit !== undefined && Exit.isFailure(chat.exit)).toBe(true)
      expect(c.one("rx.goal").events.map((e) => e.name)).toEqual(["Terminated"])
    }).pipe(Effect.provide(layers([])))
  })

  it.effect("without a tracer the runner makes no span: a tool runs in none", () => {
    const seen: Array<Option.Option<string>> = []
    const outer = probe(seen)
    return Effect.gen(function*() {
      const result = yield* Runner.run({ goal: "probe", goalId: "g4" })
      expect(result.reason).toBe("done")
      // The probe's own span has no parent: no goal, iteration or tool span around it.
      expect(seen).toEqual([Option.none()])
      const parent = yield* Effect.option(Effect.currentSpan)
      expect(Option.isNone(parent)).toBe(true)
    }).pipe(Effect.provide(layers([callTool("probe", {}), done("probed")], [echo, outer])))
  })
})
