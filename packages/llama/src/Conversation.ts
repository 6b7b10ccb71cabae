/**
 * The kernel's request as turns of a chat: the system prompt with the answer's form and the
 * tools, then user and assistant turns as the kernel writes them for a model that answers with
 * JSON actions (`JsonAction`, as @rx/llm's JSON mode does): earlier calls as JSON actions, tool
 * results as user turns, consecutive turns of one role merged, for chat templates that require
 * alternating roles. Pure: the same request gives the same turns.
 */
import { JsonAction, type LanguageModel } from "@rx/kernel"

/** One turn, as a chat template takes it. */
export interface Turn {
  readonly role: "system" | "user" | "assistant"
  readonly text: string
}

/** The turns of a request: the system turn first, then user and assistant turns, alternating. */
export const turns = (request: LanguageModel.Request): ReadonlyArray<Turn> => [
  // A plain-text request (a summary) gets no action form.
  { role: "system", text: (request.format === "text" ? [request.system] : [request.system, JsonAction.instructions(request.tools)]).filter((part) => part !== "").join("\n\n") },
  ...JsonAction.turns(request.messages).map((turn): Turn => ({ role: turn.role, text: turn.content }))
]
