/**
 * Answers real local models sent, quoted from public bug reports (`corpus.json`), each served
 * byte for byte by a real HTTP server on 127.0.0.1 and decoded through `OpenAiCompatible` and
 * `Runner.run` under today's behaviour: every case runs exactly the call the model meant, or is
 * rejected with the expected kind, and no case runs any other call. The figures are the README's.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Event, Runner, StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { Effect, Layer, Ref, Schema } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { OpenAiCompatible } from "../src/index.js"
import * as Fake from "./FakeServer.js"

interface ToolDef {
  readonly name: string
  readonly properties: Record<string, string>
  readonly required: ReadonlyArray<string>
}
export interface Case {
  readonly id: string
  readonly source: string
  readonly message: Record<string, unknown>
  readonly finish_reason?: string
  readonly tools: ReadonlyArray<ToolDef>
  readonly expect: { readonly run: { readonly tool: string; readonly input: unknown } } | { readonly reject: Event.RejectionKind }
}

const here = Path.dirname(new URL(import.meta.url).pathname)
export const cases: ReadonlyArray<Case> = (JSON.parse(Fs.readFileSync(Path.join(here, "corpus.json"), "utf8")) as { cases: ReadonlyArray<Case> }).cases

/** The body served for a case: the reported message, exactly, in a plain Chat Completions envelope. */
export const body = (c: Case): string =>
  JSON.stringify({
    id: `chatcmpl-${c.id}`,
    object: "chat.completion",
    created: 1_700_000_000,
    model: "local-model",
    choices: [{ index: 0, message: { role: "assistant", ...c.message }, finish_reason: c.finish_reason ?? "stop" }],
    usage: { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 }
  })

const typeOf = (type: string): Schema.Schema.Any => {
  switch (type) {
    case "number":
      return Schema.Number
    case "boolean":
      return Schema.Boolean
    case "array":
      return Schema.Array(Schema.Unknown)
    case "object":
      return Schema.Record({ key: Schema.String, value: Schema.Unknown })
    default:
      return Schema.String
  }
}

/** The case's tools, each recording the inputs it ran with. */
export const toolsOf = (c: Case, ran: Ref.Ref<ReadonlyArray<{ tool: string; input: unknown }>>) =>
  c.tools.map((def) =>
    Tool.make({
      name: def.name,
      description: `${def.name} (corpus)`,
      input: Schema.Struct(Object.fromEntries(
        Object.entries(def.properties).map(([key, type]) => [key, def.required.includes(key) ? typeOf(type) : Schema.optional(typeOf(type))])
      )) as unknown as Schema.Schema<unknown, unknown>,
      output: Schema.Struct({ ok: Schema.Boolean }),
      idempotent: true,
      execute: (input) => Effect.as(Ref.update(ran, (all) => [...all, { tool: def.name, input }]), { ok: true })
    })
  )

const done = Fake.completion({ toolCalls: [{ name: "done", arguments: "{\"summary\":\"ok\"}" }] })

/** What rx did with the case's answer: the calls that ran, the first decision of iteration 1, its repairs. */
const runCase = (c: Case) =>
  Effect.gen(function*() {
    const server = yield* Fake.make([{ kind: "text", status: 200, body: body(c), headers: { "content-type": "application/json" } }, done])
    const ran = yield* Ref.make<ReadonlyArray<{ tool: string; input: unknown }>>([])
    const model = OpenAiCompatible.layer({ baseUrl: server.baseUrl, model: "local-model", retry: { maxAttempts: 1, baseDelayMs: 1, maxDelayMs: 1 } })
      .pipe(Layer.provide(NodeHttpClient.layerUndici))
    const store = yield* StateStore.makeMemory
    const services = Layer.mergeAll(model, ToolRegistry.layer(toolsOf(c, ran)), Layer.succeed(StateStore.StateStore, store))
    const result = yield* Runner.run({ goal: `corpus ${c.id}`, goalId: c.id }).pipe(Effect.provide(services))
    const events = yield* store.load(c.id)
    const first = events.find((e) => e.iteration === 1 && (e._tag === "ToolStarted" || e._tag === "ActionRejected"))
    for (const request of server.received) assert.isUndefined(request.invalid, `${c.id}: request ${request.index}: ${request.invalid}`)
    return { result, ran: yield* Ref.get(ran), first, events }
  }).pipe(Effect.scoped)

describe("corpus: what real local models send", () => {
  it("holds at least 40 cases, each with a public source", () => {
    assert.isAtLeast(cases.length, 40)
    for (const c of cases) assert.match(c.source, /^https:\/\/github\.com\//, c.id)
    assert.strictEqual(new Set(cases.map((c) => c.id)).size, cases.length)
  })

  it.live("each case runs the intended call or is rejected as expected; none runs another call; the README's figures hold", () =>
    Effect.gen(function*() {
      let repaired = 0
      let clean = 0
      let rejected = 0
      let wrong = 0
      const failures: Array<string> = []
      for (const c of cases) {
        const { first, ran, result } = yield* runCase(c)
        const ended = result.status === "terminated" ? result.reason : result.status
        if (ended !== "done") failures.push(`${c.id}: ended ${ended}`)
        if ("run" in c.expect) {
          const expected = JSON.stringify([{ tool: c.expect.run.tool, input: c.expect.run.input }])
          if (JSON.stringify(ran) !== expected) {
            if (ran.length > 0) wrong++
            failures.push(`${c.id}: ran ${JSON.stringify(ran)}, expected ${expected} (${first?._tag === "ActionRejected" ? first.reason : ""})`)
          } else if (first?._tag === "ToolStarted" && first.repair !== undefined) repaired++
          else clean++
        } else {
          if (ran.length > 0) {
            wrong++
            failures.push(`${c.id}: ran ${JSON.stringify(ran)}, a call the model did not mean`)
          } else if (first?._tag !== "ActionRejected" || first.kind !== c.expect.reject) {
            failures.push(`${c.id}: expected a ${c.expect.reject} rejection, got ${first?._tag === "ActionRejected" ? `${first.kind}: ${first.reason}` : first?._tag}`)
          } else rejected++
        }
      }
      assert.deepStrictEqual(failures, [])
      assert.strictEqual(wrong, 0)
      const readme = Fs.readFileSync(Path.join(here, "..", "README.md"), "utf8")
      const figures = `${cases.length} answers: ${repaired} run after a repair, ${clean} run as sent, ${rejected} rejected with the expected kind, 0 wrong calls`
      assert.include(readme, figures)
    }), 120_000)
})
