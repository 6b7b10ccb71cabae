/**
 * What a model and a person read when something does not decode: rejected tool and `done` inputs,
 * invalid options, a tool's output its own Schema rejects, and the JSON Schemas a model is shown.
 * One short line per problem, never a Schema dump.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { Event, LanguageModel, Options, Runner, Tool, ToolRegistry } from "@rx/kernel"
import { echo, layers, runGoal } from "./fixtures.js"

const { callTool, done } = LanguageModel

/** A tool with the shapes tool inputs have: bounded integers, nested structs and arrays, a field named `title`. */
const lines = Tool.make({
  name: "lines",
  description: "Read lines.",
  input: Schema.Struct({
    path: Schema.String.annotations({ description: "A file." }),
    title: Schema.optional(Schema.String),
    limit: Schema.optional(Schema.Int.pipe(Schema.greaterThanOrEqualTo(1)).annotations({ description: "Lines at most." })),
    ranges: Schema.optional(Schema.Array(Schema.Struct({
      from: Schema.Int.pipe(Schema.greaterThanOrEqualTo(1)),
      to: Schema.optional(Schema.Int.pipe(Schema.between(1, 10)))
    }))),
    filter: Schema.optional(Schema.Struct({ text: Schema.NonEmptyString, mode: Schema.optional(Schema.Literal("exact", "regex")) }))
  }),
  output: Schema.Struct({ n: Schema.Int }),
  idempotent: true,
  execute: ({ limit }) => Effect.succeed({ n: limit === 7 ? 1.5 : 1 })
})

const rejections = (events: ReadonlyArray<Event.Event>) =>
  events.filter((e): e is Event.Of<"ActionRejected"> => e._tag === "ActionRejected").map((e) => e.reason)

/** Every `title` keyword with a string value, at any depth. */
const titles = (value: unknown): ReadonlyArray<string> =>
  Array.isArray(value)
    ? value.flatMap(titles)
    : typeof value === "object" && value !== null
    ? Object.entries(value).flatMap(([key, inner]) => (key === "title" && typeof inner === "string" ? [inner] : titles(inner)))
    : []

describe("rejected inputs, as the model reads them", () => {
  it.effect("a tool input: one short clause per problem, joined with \"; \"", () =>
    Effect.gen(function*() {
      const { events, result } = yield* runGoal("bad inputs", { maxMalformed: 10 })
      expect(result.reason).toBe("done")
      expect(rejections(events)).toEqual([
        "invalid input for lines: path: expected a string, got 42",
        "invalid input for lines: limit: expected an integer >= 1, got 0",
        "invalid input for lines: unexpected field \"foo\"; missing field \"path\"",
        "invalid input for lines: ranges[0].from: expected an integer >= 1, got 0; ranges[1].to: expected an integer between 1 and 10, got 11; filter.text: expected a non-empty string, got \"\"; filter.mode: expected \"exact\" or \"regex\", got \"fuzzy\"",
        "invalid input for echo: unexpected field \"txt\"; missing field \"text\""
      ])
      // The tool's own verdict is kept apart, for replay.
      const first = events.find((e): e is Event.Of<"ActionRejected"> => e._tag === "ActionRejected")
      expect(first?.validation).toBe("path: expected a string, got 42")
    }).pipe(Effect.provide(layers([
      callTool("lines", { path: 42 }),
      callTool("lines", { path: "a", limit: 0 }),
      callTool("lines", { foo: 1 }),
      callTool("lines", { path: "a", ranges: [{ from: 0 }, { from: 1, to: 11 }], filter: { text: "", mode: "fuzzy" } }),
      callTool("echo", { txt: 1 }),
      done("ok")
    ], [lines, echo]))))

  it.effect("the input of done", () =>
    Effect.gen(function*() {
      const { events } = yield* runGoal("bad done", { maxMalformed: 10 })
      expect(rejections(events)).toEqual([
        "invalid input for done: summary: expected a string, got 1",
        "invalid input for done: unexpected field \"extra\"",
        "invalid input for done: missing field \"summary\""
      ])
    }).pipe(Effect.provide(layers([
      callTool("done", { summary: 1 }),
      callTool("done", { summary: "x", extra: true }),
      callTool("done", {}),
      done("ok")
    ]))))

  it.effect("a tool's output its own Schema rejects", () =>
    Effect.gen(function*() {
      const registry = yield* ToolRegistry.make([lines])
      const outcome = yield* ToolRegistry.invoke(registry, { callId: "c", tool: "lines", input: { path: "a", limit: 7 } })
      expect(outcome).toEqual({
        _tag: "Failure",
        error: { kind: "fatal", message: "tool lines returned an output its Schema rejects: n: expected an integer, got 1.5" }
      })
    }))
})

describe("invalid options, as a person reads them", () => {
  it.effect("one line naming each field", () =>
    Effect.gen(function*() {
      const one = yield* Effect.flip(Options.decode({ maxIterations: 0 }))
      expect(one.message).toBe("invalid run options: maxIterations: expected an integer >= 1, got 0")
      const two = yield* Effect.flip(Options.decode({ promptBudget: 100, approval: { shell: "maybe" }, colour: "red" }))
      expect(two.message).toBe(
        "invalid run options: unexpected field \"colour\"; promptBudget: expected an integer >= 2000, got 100; approval.shell: expected one of \"auto\", \"ask\", \"deny\", got \"maybe\""
      )
    }))

  it.effect("Runner.run refuses them with the same line, recording nothing", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(Runner.run({ goal: "x", goalId: "bad", options: { maxIterations: 1.5 } }))
      expect(error.message).toBe("invalid run options: maxIterations: expected an integer >= 1, got 1.5")
    }).pipe(Effect.provide(layers([]))))
})

describe("tool JSON Schemas, as the model sees them", () => {
  it("carry no titles Effect made up, and keep descriptions, constraints and a field named title", () => {
    const parameters = lines.spec.parameters
    expect(titles(parameters)).toEqual([])
    const properties = parameters["properties"] as Record<string, Record<string, unknown>>
    expect(properties["limit"]).toEqual({ $ref: "#/$defs/Int", description: "Lines at most.", minimum: 1 })
    expect(parameters["$defs"]).toEqual({
      Int: { type: "integer", description: "an integer" },
      NonEmptyString: { type: "string", description: "a non empty string", minLength: 1 }
    })
    expect(properties["path"]).toEqual({ type: "string", description: "A file." })
    expect(properties["title"]).toEqual({ type: "string" })
    expect(properties["ranges"]).toMatchObject({
      type: "array",
      items: { type: "object", required: ["from"], properties: { to: { minimum: 1, maximum: 10 } }, additionalProperties: false }
    })
    expect(properties["filter"]).toMatchObject({ properties: { text: { $ref: "#/$defs/NonEmptyString" }, mode: { enum: ["exact", "regex"] } } })
    expect(parameters["required"]).toEqual(["path"])
  })

  it.effect("the specs recorded in GoalSubmitted are the same", () =>
    Effect.gen(function*() {
      const { events } = yield* runGoal("specs")
      const submitted = events[0]
      expect(submitted?._tag).toBe("GoalSubmitted")
      if (submitted?._tag === "GoalSubmitted") expect(titles(submitted.tools)).toEqual([])
    }).pipe(Effect.provide(layers([done("ok")], [lines, echo]))))
})
