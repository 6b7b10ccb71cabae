/**
 * The repair step (behaviour 3): JSON-mode input given as `arguments` is never dropped, rejections
 * are worded for the mode asked, a clean answer is never turned into another, and a log whose
 * calls were repaired replays exactly, from the log alone.
 */
import { describe, expect, it } from "@effect/vitest"
import { Action, Event, LanguageModel, Replay, Runner, StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { Effect, Either, FastCheck as fc, Layer, Schema } from "effect"

const listDir = Tool.make({
  name: "list_dir",
  description: "List a folder.",
  input: Schema.Struct({ path: Schema.optional(Schema.String), depth: Schema.optional(Schema.Number) }),
  output: Schema.Struct({ listed: Schema.Unknown }),
  idempotent: true,
  execute: (input) => Effect.succeed({ listed: input })
})
const specs = [listDir.spec]
const noUsage = { inputTokens: 0, outputTokens: 0 }
const text = (content: string, format?: "json_action"): LanguageModel.Response => ({
  text: content,
  toolCalls: [],
  finishReason: "stop",
  usage: noUsage,
  ...(format === undefined ? {} : { format })
})
const limits = (repair: boolean): Action.Limits => ({ maxInputDepth: 64, multiCall: true, maxCallsPerAnswer: 8, boundedAnswer: true, repair: repair ? specs : undefined })
const decided = (response: LanguageModel.Response, repair = true) => {
  const planned = Action.plan(response, limits(repair))
  if (planned._tag === "Reject") return planned
  const [first] = planned.calls
  return first === undefined ? undefined : Action.decideCall(first, [...specs], (_tool, input) => Either.right(input), limits(repair))
}

/** Run a goal under `behaviour` whose model answers `answer`, then `done`; the goal's log. */
const run = (answer: LanguageModel.Response, behaviour: number) =>
  Effect.gen(function*() {
    const store = yield* StateStore.makeMemory
    const layers = Layer.mergeAll(
      Layer.succeed(StateStore.StateStore, store),
      ToolRegistry.layer([listDir]),
      LanguageModel.layerScripted([answer, LanguageModel.done("ok")])
    )
    yield* Runner.run({ goal: "list /etc", goalId: "r1", behaviour }).pipe(Effect.provide(layers))
    return yield* store.load("r1")
  })

const started = (events: ReadonlyArray<Event.Event>) => events.find((e): e is Event.Of<"ToolStarted"> => e._tag === "ToolStarted")

describe("repair step", () => {
  it.effect("a JSON action's input given as arguments runs with that input (it ran with {} before); behaviour 2 logs decide as they did", () =>
    Effect.gen(function*() {
      const answer = text(`{"tool": "list_dir", "arguments": {"path": "/etc"}}`, "json_action")
      const v3 = started(yield* run(answer, 3))
      expect(v3?.input).toEqual({ path: "/etc" })
      expect(v3?.repair).toEqual(["input_key"])
      const v2 = started(yield* run(answer, 2))
      expect(v2?.input).toEqual({})
      expect(v2?.repair).toBeUndefined()
    }))

  it("input given twice, or arguments beside the action's keys, is refused, never guessed", () => {
    expect(decided(text(`{"tool": "list_dir", "input": {}, "arguments": {"path": "/etc"}}`))).toMatchObject({ _tag: "Reject", kind: "bad_json" })
    expect(decided(text(`{"tool": "list_dir", "path": "/etc"}`))).toMatchObject({ _tag: "Reject", kind: "bad_json" })
  })

  it("a rejection tells a tools-mode model about tool calls, a JSON-mode model about the JSON action", () => {
    const tools = decided(text(`{"name": "list_dir"`))
    const json = decided(text(`{"name": "list_dir"`, "json_action"))
    expect(tools).toMatchObject({ _tag: "Reject", kind: "bad_json" })
    expect(json).toMatchObject({ _tag: "Reject", kind: "bad_json" })
    expect(tools?._tag === "Reject" ? tools.reason : "").not.toContain(`{"tool"`)
    expect(tools?._tag === "Reject" ? tools.reason : "").toContain("tool call")
    expect(json?._tag === "Reject" ? json.reason : "").toContain(`{"tool": "<name>", "input": {...}}`)
    const prose = decided(text("I will list the folder."))
    expect(prose?._tag === "Reject" ? prose.reason : "").not.toContain(`{"tool"`)
  })

  it("a call inside reasoning never runs; the one after it does", () => {
    const inside = `<think>\n<tool_call>\n{"name": "list_dir", "arguments": {"path": "/root"}}\n</tool_call>\n</think>\n\n<tool_call>\n{"name": "list_dir", "arguments": {"path": "/etc"}}\n</tool_call>`
    expect(decided(text(inside))).toMatchObject({ _tag: "Call", tool: "list_dir", input: { path: "/etc" }, repair: ["reasoning", "tool_call_tag"] })
    expect(decided(text(`<think>\n<tool_call>\n{"name": "list_dir", "arguments": {}}\n</tool_call>`))).toMatchObject({ _tag: "Reject", kind: "no_action" })
  })

  it("several calls written as text, a truncated call, a doubled or prefixed name", () => {
    const two = `<tool_call>\n{"name": "list_dir", "arguments": {}}\n</tool_call>\n<tool_call>\n{"name": "list_dir", "arguments": {}}\n</tool_call>`
    expect(decided(text(two))).toMatchObject({ _tag: "Reject", kind: "too_many_calls" })
    expect(decided(text(`<tool_call>\n{"name": "list_dir", "arguments": {"path": "/e`))).toMatchObject({ _tag: "Reject", kind: "bad_json" })
    const native = (name: string, args: string): LanguageModel.Response => ({ text: "", toolCalls: [{ id: "c", name, arguments: args }], finishReason: "tool_calls", usage: noUsage })
    expect(decided(native("list_dirlist_dir", "{}"))).toMatchObject({ _tag: "Reject", kind: "unknown_tool" })
    expect(decided(native("functions.list_dir", JSON.stringify(JSON.stringify({ path: "/etc" }))))).toMatchObject({ _tag: "Call", tool: "list_dir", input: { path: "/etc" }, repair: ["name_prefix", "double_encoded"] })
    expect(decided(native("", `{"id":"x"}`))).toMatchObject({ _tag: "Reject", kind: "bad_json" })
  })

  const args = fc.dictionary(fc.constantFrom("path", "depth", "x", "y"), fc.jsonValue()).map((value) => JSON.parse(JSON.stringify(value)) as Record<string, unknown>)

  it.prop("the repair step never turns a valid answer into another: a clean call or JSON action decides as it did", [
    args,
    fc.constantFrom("list_dir", "done", "other"),
    fc.boolean(),
    fc.string()
  ], ([input, name, native, thought]) => {
    const response: LanguageModel.Response = native
      ? { text: thought, toolCalls: [{ id: "c", name, arguments: JSON.stringify(input) }], finishReason: "tool_calls", usage: noUsage }
      : text(JSON.stringify({ thought, tool: name, input }))
    const before = decided(response, false)
    const after = decided(response, true)
    expect(after?._tag).toBe(before?._tag)
    if (before?._tag === "Call" && after?._tag === "Call") {
      expect([after.tool, after.input, after.repair]).toEqual([before.tool, before.input, undefined])
    }
    if (before?._tag === "Reject" && after?._tag === "Reject") expect(after.kind).toBe(before.kind)
  })

  it.prop("text with no call markers and no JSON never becomes a call", [fc.string().filter((s) => !/[{[<]|TOOL_CALLS|to=functions|```/.test(s))], ([prose]) => {
    expect(decided(text(prose))?._tag).toBe("Reject")
  })

  const formats: ReadonlyArray<(input: Record<string, unknown>) => string> = [
    (input) => `<think>\nmaybe\n</think>\n\n<tool_call>\n${JSON.stringify({ name: "list_dir", arguments: input })}\n</tool_call>`,
    (input) => JSON.stringify({ name: "list_dir", parameters: input }),
    (input) => `<|python_tag|>${JSON.stringify({ type: "function", name: "list_dir", parameters: input })}<|eom_id|>`,
    (input) => `[TOOL_CALLS]list_dir[ARGS]${JSON.stringify(input)}`,
    (input) => `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>list_dir\n\`\`\`json\n${JSON.stringify(input)}\n\`\`\`<｜tool▁call▁end｜><｜tool▁calls▁end｜>`,
    (input) => `<|channel|>commentary to=functions.list_dir <|constrain|>json<|message|>${JSON.stringify(input)}<|call|>`,
    (input) => `\`\`\`json\n${JSON.stringify({ name: "list_dir", arguments: input })}\n\`\`\``
  ]
  const listInput = fc.record({ path: fc.string(), depth: fc.integer({ min: 0, max: 9 }) }, { requiredKeys: [] })

  it.effect.prop("a log whose calls were repaired replays from the log alone and reproduces it; another repair recorded is a divergence", [
    fc.nat({ max: formats.length - 1 }),
    listInput
  ], ([format, input]) =>
    Effect.gen(function*() {
      const events = yield* run(text((formats[format] as (i: Record<string, unknown>) => string)(input)), 3)
      const call = started(events)
      expect(call?.input).toEqual(input)
      expect(call?.repair?.length).toBeGreaterThan(0)
      // Replay provides no model and no tools of its own: every answer and outcome comes from the log.
      const verified = yield* Replay.check(events)
      expect(verified._tag).toBe("Complete")
      const tampered = events.map((e) => (e === call ? { ...call, repair: ["mistral", "double_encoded"] } : e))
      const diverged = yield* Effect.flip(Replay.check(tampered))
      expect(diverged._tag).toBe("@rx/kernel/NonDeterminism")
    }), { fastCheck: { numRuns: 40 } })
})
