/**
 * A model that answers with JSON actions instead of tool calls (a server's JSON mode, a local
 * model under a grammar): how it is told the form and the tools, and how a request's history is
 * written for it. `Action` reads its answers back: `{"thought"?: "...", "tool": "<name>",
 * "input": {...}}`. Pure: the same request gives the same text.
 */
import { Either } from "effect"
import type * as LanguageModel from "./LanguageModel.js"
import type * as Tool from "./Tool.js"

/** What the system prompt gains: the answer's form and each tool with its input's JSON Schema. */
export const instructions = (tools: ReadonlyArray<Tool.Spec>): string =>
  [
    "Answer with exactly one JSON object and nothing else, of this form:",
    `{"thought": "<brief reasoning>", "tool": "<tool name>", "input": {<the tool's arguments>}}`,
    "The tools, each with the JSON Schema of its input:",
    ...tools.map((tool) => `- ${tool.name}: ${tool.description}\n  input: ${JSON.stringify(tool.parameters)}`)
  ].join("\n")

/** An earlier call written back as the JSON action the model would have answered (arguments that are not JSON as a string). */
export const render = (thought: string, call: LanguageModel.ToolCall): string => {
  const input = Either.getOrElse(Either.try((): unknown => JSON.parse(call.arguments)), () => call.arguments)
  return JSON.stringify({ ...(thought === "" ? {} : { thought }), tool: call.name, input })
}

/** One turn of the conversation: the model's, or the user's (the goal, tool results). */
export interface Turn {
  readonly role: "user" | "assistant"
  readonly content: string
}

/**
 * A request's messages as turns for such a model: earlier calls as JSON actions, tool results as
 * user turns, consecutive turns of one role merged (chat templates that require alternating roles).
 */
export const turns = (messages: ReadonlyArray<LanguageModel.Message>): ReadonlyArray<Turn> => {
  const out: Array<{ role: Turn["role"]; content: string }> = []
  const push = (role: Turn["role"], content: string) => {
    const last = out[out.length - 1]
    if (last !== undefined && last.role === role) last.content = `${last.content}\n\n${content}`
    else out.push({ role, content })
  }
  for (const message of messages) {
    switch (message.role) {
      case "user":
        push("user", message.content)
        break
      case "assistant":
        push(
          "assistant",
          message.toolCalls.length === 0 ? message.content : message.toolCalls.map((call, i) => render(i === 0 ? message.content : "", call)).join("\n")
        )
        break
      case "tool":
        push("user", `Result of ${message.name}:\n${message.content}`)
        break
    }
  }
  return out
}
