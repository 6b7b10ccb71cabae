import { assert, describe, it } from "@effect/vitest"
import * as Fake from "./FakeServer.js"

const tools = [{ type: "function", function: { name: "t", description: "", parameters: { type: "object" } } }]
const call = { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "t", arguments: "{}" } }] }

// The fake server's checks are what make "every request is API-valid" mean something.
describe("the fake server's API checks", () => {
  it("accepts a paired conversation", () => {
    assert.isUndefined(Fake.validate({ model: "m", tools, messages: [{ role: "user", content: "u" }, call, { role: "tool", tool_call_id: "c1", content: "r" }] }))
  })
  it("rejects a tool call without its result", () => {
    assert.include(Fake.validate({ model: "m", tools, messages: [{ role: "user", content: "u" }, call, { role: "user", content: "x" }] }), "did not have response messages: c1")
    assert.include(Fake.validate({ model: "m", tools, messages: [{ role: "user", content: "u" }, call] }), "without results")
  })
  it("rejects a result without its call, and tool messages without tools", () => {
    assert.include(Fake.validate({ model: "m", tools, messages: [{ role: "tool", tool_call_id: "c9", content: "r" }] }), "preceeding")
    assert.include(Fake.validate({ model: "m", messages: [{ role: "user", content: "u" }, call, { role: "tool", tool_call_id: "c1", content: "r" }] }), "needs tools")
  })
  it("rejects parallel_tool_calls without tools", () => {
    assert.include(Fake.validate({ model: "m", parallel_tool_calls: false, messages: [{ role: "user", content: "u" }] }), "only allowed")
  })
  it("checks Anthropic's pairing of tool_use and tool_result", () => {
    const use = { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "t", input: {} }] }
    assert.isUndefined(Fake.validateAnthropic({ model: "m", max_tokens: 1, messages: [{ role: "user", content: "u" }, use, { role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content: "r" }] }] }))
    assert.include(Fake.validateAnthropic({ model: "m", max_tokens: 1, messages: [{ role: "user", content: "u" }, use, { role: "user", content: "x" }] }), "without `tool_result`")
  })
})
