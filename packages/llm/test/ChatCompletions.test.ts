import { assert, describe, it } from "@effect/vitest"
import type { LanguageModel } from "@rx/kernel"
import { Either } from "effect"
import { ChatCompletions } from "../src/index.js"

const options: ChatCompletions.Options = { model: "m", mode: "tools", parallelToolCalls: false }

const spec = (name: string, parameters: Record<string, unknown> = { type: "object" }) => ({
  name,
  description: `the ${name} tool`,
  parameters,
  idempotent: false
})

describe("ChatCompletions", () => {
  it("maps finish reasons faithfully; length stays length", () => {
    assert.deepStrictEqual(
      ["stop", "length", "tool_calls", "function_call", "content_filter", "eos", null, undefined].map(ChatCompletions.finishReason),
      ["stop", "length", "tool_calls", "tool_calls", "content_filter", "other", "other", "other"]
    )
  })

  it("finds the server's message in each error body style", () => {
    assert.strictEqual(ChatCompletions.errorMessage("{\"error\":{\"message\":\"bad model\",\"type\":\"x\"}}"), "bad model")
    assert.strictEqual(ChatCompletions.errorMessage("{\"error\":\"model not found\"}"), "model not found")
    assert.strictEqual(ChatCompletions.errorMessage("{\"object\":\"error\",\"message\":\"too long\"}"), "too long")
    assert.strictEqual(ChatCompletions.errorMessage("{\"detail\":\"Not Found\"}"), "Not Found")
    assert.strictEqual(ChatCompletions.errorMessage("Internal Server Error\n"), "Internal Server Error")
    assert.strictEqual(ChatCompletions.errorMessage(""), "(empty body)")
    assert.strictEqual(ChatCompletions.errorMessage("x".repeat(600)).length, 503)
  })

  it("finds tool calls without results, and results without calls", () => {
    const call: LanguageModel.Message = { role: "assistant", content: "", toolCalls: [{ id: "a", name: "t", arguments: "{}" }] }
    assert.isUndefined(ChatCompletions.conversationProblem([{ role: "user", content: "hi" }, call, { role: "tool", toolCallId: "a", name: "t", content: "ok" }]))
    assert.include(ChatCompletions.conversationProblem([call, { role: "user", content: "hi" }]), "\"a\" has no result before message 1")
    assert.include(ChatCompletions.conversationProblem([call]), "\"a\" has no result")
    assert.include(ChatCompletions.conversationProblem([{ role: "tool", toolCallId: "b", name: "t", content: "" }]), "did not make")
  })

  it("builds the same bytes for the same request", () => {
    const request: LanguageModel.Request = { system: "s", messages: [{ role: "user", content: "u" }], tools: [spec("a")] }
    const one = ChatCompletions.fromRequest(options, request)
    const two = ChatCompletions.fromRequest(options, request)
    assert.strictEqual(JSON.stringify(one), JSON.stringify(two))
  })

  it("offers no tools fields when there are no tools", () => {
    const body = ChatCompletions.fromRequest(options, { system: "", messages: [{ role: "user", content: "u" }], tools: [] })
    assert.deepStrictEqual(body, Either.right({ model: "m", messages: [{ role: "user", content: "u" }], stream: false }))
  })

  it("asks a plain-text request (a summary) as plain text in JSON mode too: no action schema, no action instructions", () => {
    const request: LanguageModel.Request = { system: "s", messages: [{ role: "user", content: "u" }], tools: [], format: "text" }
    const expected: unknown = { model: "m", messages: [{ role: "system", content: "s" }, { role: "user", content: "u" }], stream: false }
    assert.deepStrictEqual<unknown>(Either.getOrThrow(ChatCompletions.fromRequest({ ...options, mode: "json" }, request)), expected)
    assert.deepStrictEqual<unknown>(Either.getOrThrow(ChatCompletions.fromRequest(options, request)), expected)
  })

  it("constrains a JSON-mode answer per tool, or by name only when schemas use $ref", () => {
    const perTool = ChatCompletions.actionSchema([spec("a", { type: "object", properties: { x: { type: "number" } } }), spec("b")])
    assert.deepStrictEqual(perTool, {
      anyOf: [
        {
          type: "object",
          properties: { thought: { type: "string" }, tool: { type: "string", enum: ["a"] }, input: { type: "object", properties: { x: { type: "number" } } } },
          required: ["tool", "input"],
          additionalProperties: false
        },
        {
          type: "object",
          properties: { thought: { type: "string" }, tool: { type: "string", enum: ["b"] }, input: { type: "object" } },
          required: ["tool", "input"],
          additionalProperties: false
        }
      ]
    })
    const byName = ChatCompletions.actionSchema([spec("a", { $defs: { X: {} }, properties: { x: { $ref: "#/$defs/X" } } }), spec("b")])
    assert.deepStrictEqual(byName, {
      type: "object",
      properties: { thought: { type: "string" }, tool: { type: "string", enum: ["a", "b"] }, input: { type: "object" } },
      required: ["tool", "input"],
      additionalProperties: false
    })
  })

  it("a call whose arguments are null or empty, for a tool that takes none, keeps its name (it read as a call with no function name)", () => {
    const calls = [
      { id: "call_a", type: "function", function: { name: "list_roots", arguments: null } },
      { id: "call_b", type: "function", function: { name: "list_roots", arguments: "" } }
    ]
    const response = ChatCompletions.toResponse({ choices: [{ index: 0, message: { role: "assistant", content: null, tool_calls: calls }, finish_reason: "tool_calls" }] })
    assert.deepStrictEqual(
      Either.getOrUndefined(Either.map(response, (r) => r.toolCalls)),
      [{ id: "call_a", name: "list_roots", arguments: "" }, { id: "call_b", name: "list_roots", arguments: "" }]
    )
  })

  it("reports an answer without choices", () => {
    assert.deepStrictEqual(ChatCompletions.toResponse({ choices: [] }), Either.left("the answer has no choices"))
  })
})
