/**
 * The repair step: what a local model meant by an answer whose call did not arrive as clean
 * `tool_calls`. One deterministic decoder per decoding version, with no option to choose: the
 * same answer, tools and results give the same reading, so replay reproduces it, and the repairs
 * that read a call are recorded with it. Decoding 3 (behaviours 3 and 4) reads a family's call
 * wherever it stands; decoding 5 (behaviour 5 on) takes a call written as text only when it is
 * the answer (see the README). A repaired call still runs only if it names an offered tool
 * exactly and its input passes the tool's Schema (the kernel checks both).
 */
import type * as Spec from "./internal/spec.js"
import * as V3 from "./internal/v3.js"
import * as V5 from "./internal/v5.js"

/** What the decoder needs of an offered tool (`@rx/kernel`'s `Tool.Spec` fits). */
export type ToolSpec = Spec.Spec

/** A repair that applied, as recorded with the decision (`ToolStarted.repair`, ...). */
export type Kind = V5.Kind

/** A call read from an answer: the tool named, its input, and the repairs that made it. */
export interface Found {
  readonly tool: string
  readonly input: Record<string, unknown>
  readonly repairs: ReadonlyArray<Kind>
}

/** Why an answer's text was not executed: the rejection kind and what the model is told. */
export type Refusal = V3.Refusal

/**
 * What the text of an answer with no native calls holds: one call; a refusal; or no text-call
 * format at all (`None`: the text, reasoning removed, is read as a JSON action or as prose).
 */
export type TextResult =
  | { readonly _tag: "Call"; readonly call: Found }
  | { readonly _tag: "Refused"; readonly refusal: Refusal }
  | { readonly _tag: "None"; readonly text: string; readonly repairs: ReadonlyArray<Kind> }

/** The decoding versions: 3 reads as behaviours 3 and 4 did; 5 takes a text call only when it is the answer. */
export type Decoding = 3 | 5

/** What reading an answer's text needs besides the text. */
export interface Context {
  readonly tools: ReadonlyArray<ToolSpec>
  /** The name of the tool that ends a goal. */
  readonly done: string
  /** The model was asked for a JSON action (JSON mode): a refusal shows that form, else a tool call. */
  readonly json?: boolean | undefined
  readonly decoding: Decoding
  /** Decoding 5: the goal's tool results the model was shown; a call that stands in one word for word is an echo, not run. */
  readonly results?: ReadonlyArray<string> | undefined
}

/** Read a call written as text, after its reasoning is set aside. */
export const text = (raw: string, context: Context): TextResult =>
  context.decoding === 3
    ? V3.text(raw, context.tools, context.done, context.json ?? false)
    : V5.text(raw, { tools: context.tools, done: context.done, json: context.json ?? false, results: context.results ?? [] })

/** A call's name as offered: exact, or `functions.<name>` for an offered `<name>` (`name_prefix`). */
export const name: (raw: string, tools: ReadonlyArray<ToolSpec>, done: string) => { readonly name: string; readonly repaired: boolean } = V3.name

/**
 * A call's arguments as an object: an object as it is; JSON text of an object; JSON text of a
 * string that holds JSON text of an object (`double_encoded`); nothing or empty text as `{}`.
 */
export const input: (args: unknown) => { readonly input: Record<string, unknown>; readonly repaired: boolean } | { readonly error: string } = V3.input

/** The special tokens of the model families (`<|...|>`, `<｜...｜>`, `[TOOL_CALLS]`, ...) and U+FFFD that an input's keys and texts hold: an input holding any is refused (decoding 5). */
export const leaked: (input: unknown) => ReadonlyArray<string> = V5.leaked

/** What a refusal tells the model to send instead: a tool call (tools mode) or a JSON action (JSON mode), with the tool's parameters when it names an offered one. */
export const expected = (tool: string | undefined, tools: ReadonlyArray<ToolSpec>, done: string, json: boolean): string =>
  V5.expected(tool, tools, done, json)
