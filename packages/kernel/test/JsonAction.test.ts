/**
 * The JSON action form, written for a model and read back: a call the kernel writes back into the
 * history decodes, through `Action.plan`, as the same tool and input; turns alternate.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either, FastCheck as fc } from "effect"
import { Action, JsonAction, LanguageModel } from "@rx/kernel"

const json = fc.jsonValue().map((value) => JSON.parse(JSON.stringify(value)) as unknown)
const input = fc.dictionary(fc.string(), json)

describe("JsonAction", () => {
  it.prop("a call written back decodes as the same call", [fc.string(), fc.stringMatching(/^[a-z_]{1,20}$/), input], ([thought, name, args]) => {
    const text = JsonAction.render(thought, { id: "c", name, arguments: JSON.stringify(args) })
    const plan = Action.plan({ text, toolCalls: [], finishReason: "stop", usage: { inputTokens: 0, outputTokens: 0 } })
    expect(plan._tag).toBe("Calls")
    const calls = plan._tag === "Calls" ? plan.calls : []
    expect(calls.length).toBe(1)
    expect(calls.map((call) => Either.isRight(call) && call.right)).toMatchObject([{ tool: name, input: args }])
    expect(JSON.parse(text)).toEqual({ ...(thought === "" ? {} : { thought }), tool: name, input: args })
  })

  it("arguments that are not JSON are written back as a string; turns of one role are merged", () => {
    expect(JsonAction.render("", { id: "c", name: "echo", arguments: "{oops" })).toBe(`{"tool":"echo","input":"{oops"}`)
    const turns = JsonAction.turns([
      { role: "user", content: "the goal" },
      { role: "assistant", content: "first", toolCalls: [...LanguageModel.callTool("a", { x: 1 }).toolCalls, ...LanguageModel.callTool("b", {}).toolCalls] },
      { role: "tool", toolCallId: "1", name: "a", content: "one" },
      { role: "tool", toolCallId: "2", name: "b", content: "two" }
    ])
    expect(turns.map((t) => t.role)).toEqual(["user", "assistant", "user"])
    expect(turns[1]?.content.split("\n").map((line) => JSON.parse(line) as unknown)).toEqual([
      { thought: "first", tool: "a", input: { x: 1 } },
      { tool: "b", input: {} }
    ])
    expect(turns[2]?.content).toBe("Result of a:\none\n\nResult of b:\ntwo")
  })
})
