/**
 * The kernel's request as turns of a chat: the system prompt with the answer's form and the
 * tools, then user and assistant turns. Earlier calls are written back as the JSON actions the
 * model answers with, and tool results as user turns, as in @rx/llm's JSON mode; consecutive
 * turns of one role are merged, for chat templates that require alternating roles. Pure: the same
 * request gives the same turns.
 */
import type { LanguageModel, Tool } from "@rx/kernel"
import { Either } from "effect"

/** One turn, as a chat template takes it. */
export interface Turn {
  readonly role: "system" | "user" | "assistant"
  readonly text: string
}

/** What the system prompt gains: the form of an answer and each tool with its input's JSON Schema. */
export const instructions = (tools: ReadonlyArray<Tool.Spec>): string =>
  [
    "Answer with exactly one JSON object and nothing else, of this form:",
    `{"thought": "<brief reasoning>", "tool": "<tool name>", "input": {<the tool's arguments>}}`,
    "The tools, each with the JSON Schema of its input:",
    ...tools.map((tool) => `- ${tool.name}: ${tool.description}\n  input: ${JSON.stringify(tool.parameters)}`)
  ].join("\n")

/** An earlier call, written as the action the model would have answered. */
const action = (thought: string, call: LanguageModel.ToolCall): string => {
  const input = parse(call.arguments)
  return JSON.stringify({ ...(thought === "" ? {} : { thought }), tool: call.name, input: input === undefined ? call.arguments : input })
}

const parse = (text: string): unknown => Either.getOrUndefined(Either.try((): unknown => JSON.parse(text)))

/** The turns of a request: the system turn first, then user and assistant turns, alternating. */
export const turns = (request: LanguageModel.Request): ReadonlyArray<Turn> => {
  const system = [request.system, instructions(request.tools)].filter((part) => part !== "").join("\n\n")
  const out: Array<{ role: Turn["role"]; text: string }> = [{ role: "system", text: system }]
  const push = (role: "user" | "assistant", text: string) => {
    const last = out[out.length - 1]
    if (last !== undefined && last.role === role) last.text = `${last.text}\n\n${text}`
    else out.push({ role, text })
  }
  for (const message of request.messages) {
    switch (message.role) {
      case "user":
        push("user", message.content)
        break
      case "assistant":
        push(
          "assistant",
          message.toolCalls.length === 0 ? message.content : message.toolCalls.map((call, i) => action(i === 0 ? message.content : "", call)).join("\n")
        )
        break
      case "tool":
        push("user", `Result of ${message.name}:\n${message.content}`)
        break
    }
  }
  return out
}
