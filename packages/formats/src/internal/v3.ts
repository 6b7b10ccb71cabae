/**
 * The decoding of behaviours 3 and 4, kept exactly as it decided: a log written under those
 * rules decodes the same forever. Reasoning blocks are stripped first (a call inside one never
 * runs); then the text-call formats of the model families are read wherever they stand in the
 * text, and the recurring argument faults of native calls are repaired. Newer goals are read by
 * `v5` (the call must be the answer).
 */
import type * as Tool from "./spec.js"

/** A repair that applied, as recorded with the decision (`ToolStarted.repair`, ...). */
export type Kind =
  /** A reasoning block (`<think>`, gpt-oss's analysis channel) was set aside before the call. */
  | "reasoning"
  /** A `<tool_call>{"name", "arguments"}</tool_call>` block in the text (Hermes, Qwen). */
  | "tool_call_tag"
  /** Qwen3-Coder's `<function=name><parameter=p>value</parameter></function>`. */
  | "xml_function"
  /** The whole text one `{"name", "arguments"|"parameters"}` object (Llama 3.x). */
  | "bare_json"
  /** Llama's `<|python_tag|>{...}`. */
  | "python_tag"
  /** Mistral's `[TOOL_CALLS]`, as a JSON list or `name[ARGS]{...}`. */
  | "mistral"
  /** DeepSeek's `<｜tool▁call▁begin｜>` tokens. */
  | "deepseek"
  /** gpt-oss's Harmony form `to=functions.name ... <|message|>{...}`. */
  | "harmony"
  /** The call inside a fenced ```json block that is the whole text. */
  | "fence"
  /** `functions.name` for an offered tool `name`. */
  | "name_prefix"
  /** Arguments sent as a JSON string that holds the JSON object. */
  | "double_encoded"
  /** A JSON action that gave its input as `arguments` or `parameters` instead of `input`. */
  | "input_key"

/** A call read from an answer: the tool named, its input, and the repairs that made it. */
export interface Found {
  readonly tool: string
  readonly input: Record<string, unknown>
  readonly repairs: ReadonlyArray<Kind>
}

/** Why an answer's text was not executed: the rejection kind and what the model is told. */
export interface Refusal {
  readonly kind: "bad_json" | "too_many_calls" | "no_action"
  readonly reason: string
}

/**
 * What the text of an answer with no native calls holds: one call; a refusal; or no text-call
 * format at all (`None`: the text, reasoning removed, is read as a JSON action or as prose).
 */
export type TextResult =
  | { readonly _tag: "Call"; readonly call: Found }
  | { readonly _tag: "Refused"; readonly refusal: Refusal }
  | { readonly _tag: "None"; readonly text: string; readonly repairs: ReadonlyArray<Kind> }

interface Candidate {
  readonly name: string
  readonly args: unknown
}

/** The calls found, and the further repairs reading them took (Qwen3-Coder's XML inside a `<tool_call>` block). */
type Read = { readonly calls: ReadonlyArray<Candidate>; readonly also?: ReadonlyArray<Kind> } | { readonly error: string }

interface Format {
  readonly kind: Kind
  /** How the format is named to the model. */
  readonly label: string
  /** `undefined` when the text does not use the format. */
  readonly read: (body: string, tools: ReadonlyArray<Tool.Spec>) => Read | undefined
}

export const isObject = (value: unknown): value is Record<string, unknown> =>
  value !== null && typeof value === "object" && !Array.isArray(value)

export const parse = (text: string): { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: string } => {
  try {
    return { ok: true, value: JSON.parse(text) as unknown }
  } catch (error) {
    return { ok: false, error: error instanceof Error ? error.message : String(error) }
  }
}

/**
 * The JSON value at the start of `text` (after spaces), found by balancing brackets outside
 * strings, and what follows it; `undefined` when it never closes (a truncated value).
 */
export const leadingJson = (text: string): { readonly json: string; readonly rest: string } | undefined => {
  const start = text.length - text.trimStart().length
  const open = text[start]
  if (open !== "{" && open !== "[") return undefined
  let depth = 0
  let inString = false
  for (let i = start; i < text.length; i++) {
    const c = text[i]
    if (inString) {
      if (c === "\\") i++
      else if (c === "\"") inString = false
      continue
    }
    if (c === "\"") inString = true
    else if (c === "{" || c === "[") depth++
    else if (c === "}" || c === "]") {
      depth--
      if (depth === 0) return { json: text.slice(start, i + 1), rest: text.slice(i + 1) }
    }
  }
  return undefined
}

/** Exactly one JSON value, with only `allowedAfter` (end-of-turn tokens, spaces) after it. */
const onlyJson = (text: string, allowedAfter: RegExp = trailingTokens): { readonly value: unknown } | { readonly error: string } => {
  const found = leadingJson(text)
  if (found === undefined) return { error: "the JSON is cut off or its brackets do not balance" }
  if (found.rest.replace(allowedAfter, "").trim() !== "") return { error: "more text follows the call's JSON" }
  const value = parse(found.json)
  return value.ok ? { value: value.value } : { error: `the JSON is not valid (${value.error})` }
}

/** End-of-turn tokens some servers leave at the end of the text. */
const trailingTokens = /(<\|eot_id\|>|<\|eom_id\|>|<\|im_end\|>|<\|end\|>|<\|call\|>|<\/s>|<\|return\|>)/g

/** A call object of the JSON formats: `{"name", "arguments"|"parameters"}`, or `{"type": "function", "function": {...}}`. */
const candidate = (value: unknown): Candidate | string => {
  if (!isObject(value)) return "a call must be a JSON object"
  const inner = isObject(value.function) && typeof value.function.name === "string" ? value.function : value
  const name = inner.name
  if (typeof name !== "string") return "the call has no \"name\""
  const keys = Object.keys(inner).filter((key) => !["name", "arguments", "parameters", "type", "id", "function"].includes(key))
  if (keys.length > 0) return `the call has keys other than "name" and "arguments" (${keys.map((key) => JSON.stringify(key)).join(", ")})`
  if ("arguments" in inner && "parameters" in inner) return "the call has both \"arguments\" and \"parameters\""
  return { name, args: "arguments" in inner ? inner.arguments : inner.parameters }
}

const calls = (items: ReadonlyArray<unknown>): Read => {
  const out: Array<Candidate> = []
  for (const item of items) {
    const c = candidate(item)
    if (typeof c === "string") return { error: c }
    out.push(c)
  }
  return { calls: out }
}

/** A JSON property's type in a tool's JSON Schema, when it names one. */
export const propertyType = (tools: ReadonlyArray<Tool.Spec>, tool: string, property: string): string | undefined => {
  const spec = tools.find((t) => t.name === tool)
  const properties = spec?.parameters["properties"]
  const schema = isObject(properties) ? properties[property] : undefined
  return isObject(schema) && typeof schema.type === "string" ? schema.type : undefined
}

/** A parameter's text as the tool's Schema types it: numbers, booleans, objects and arrays are read as JSON, the rest kept as text. */
export const typed = (text: string, type: string | undefined): unknown => {
  if (type === "number" || type === "integer") return /^-?\d+(\.\d+)?([eE][+-]?\d+)?$/.test(text.trim()) ? Number(text.trim()) : text
  if (type === "boolean") return text.trim() === "true" ? true : text.trim() === "false" ? false : text
  if (type === "object" || type === "array" || type === "null") {
    const value = parse(text)
    return value.ok ? value.value : text
  }
  return text
}

/** `<function=name>` followed by `<parameter=p>value</parameter>` items, or by a JSON object (Llama's `<function=name>{...}</function>`). */
const xmlFunction = (block: string, tools: ReadonlyArray<Tool.Spec>): Read => {
  const head = /^\s*<function=([^>\n]+)>/.exec(block)
  if (head === null) return { error: "a <function=...> tag was expected" }
  const name = (head[1] ?? "").trim()
  let body = block.slice(head[0].length)
  const close = body.lastIndexOf("</function>")
  if (close >= 0) {
    // A closing </tool_call> whose opening tag the model left out changes nothing.
    if (body.slice(close + "</function>".length).replace("</tool_call>", "").replace(trailingTokens, "").trim() !== "") return { error: "text follows </function>" }
    body = body.slice(0, close)
  }
  if (body.trim().startsWith("{")) {
    const json = onlyJson(body)
    return "error" in json ? json : { calls: [{ name, args: json.value }] }
  }
  const args: Record<string, unknown> = {}
  const parts = body.split(/<parameter=/)
  if ((parts[0] ?? "").trim() !== "") return { error: "text before the first <parameter=...>" }
  for (const part of parts.slice(1)) {
    const end = part.indexOf(">")
    if (end < 0) return { error: "a <parameter=...> tag is not closed" }
    const key = part.slice(0, end).trim()
    let value = part.slice(end + 1)
    const closing = value.indexOf("</parameter>")
    if (closing >= 0) {
      if (value.slice(closing + "</parameter>".length).trim() !== "") return { error: `text follows </parameter> of ${key}` }
      value = value.slice(0, closing)
    }
    if (key in args) return { error: `parameter ${key} is given twice` }
    args[key] = typed(value.replace(/^\n+/, "").replace(/\n+$/, ""), propertyType(tools, name, key))
  }
  return { calls: [{ name, args }] }
}

const toolCallTag: Format = {
  kind: "tool_call_tag",
  label: "<tool_call> blocks",
  read: (body, tools) => {
    if (!body.includes("<tool_call>")) return undefined
    const blocks = body.split("<tool_call>").slice(1)
    const out: Array<Candidate> = []
    let xml = false
    for (const [i, raw] of blocks.entries()) {
      const close = raw.indexOf("</tool_call>")
      // Only the last block may lack its closing tag, and only if what it holds is complete.
      if (close < 0 && i < blocks.length - 1) return { error: "a <tool_call> block is not closed" }
      const inner = (close < 0 ? raw : raw.slice(0, close)).trim()
      if (inner.startsWith("<function=")) xml = true
      const read = inner.startsWith("<function=") ? xmlFunction(inner, tools) : inner.startsWith("{") ? jsonCall(inner) : { error: "a <tool_call> block holds neither JSON nor <function=...>" }
      if ("error" in read) return read
      out.push(...read.calls)
    }
    return xml ? { calls: out, also: ["xml_function"] } : { calls: out }
  }
}

const jsonCall = (text: string): Read => {
  const json = onlyJson(text)
  if ("error" in json) return json
  return calls(Array.isArray(json.value) ? json.value : [json.value])
}

const functionTag: Format = {
  kind: "xml_function",
  label: "a <function=...> block",
  read: (body, tools) => {
    if (!body.includes("<function=")) return undefined
    const start = body.indexOf("<function=")
    const blocks = body.slice(start).split(/(?=<function=)/)
    const out: Array<Candidate> = []
    for (const block of blocks) {
      const read = xmlFunction(block, tools)
      if ("error" in read) return read
      out.push(...read.calls)
    }
    return { calls: out }
  }
}

const pythonTag: Format = {
  kind: "python_tag",
  label: "<|python_tag|>",
  read: (body) => {
    const at = body.indexOf("<|python_tag|>")
    if (at < 0) return undefined
    const items = body.slice(at + "<|python_tag|>".length).replace(trailingTokens, "").split(/;\s*(?=\{)/)
    const out: Array<Candidate> = []
    for (const item of items) {
      const read = jsonCall(item)
      if ("error" in read) return read
      out.push(...read.calls)
    }
    return { calls: out }
  }
}

const mistral: Format = {
  kind: "mistral",
  label: "[TOOL_CALLS]",
  read: (body) => {
    if (!body.includes("[TOOL_CALLS]")) return undefined
    const out: Array<Candidate> = []
    for (const raw of body.split("[TOOL_CALLS]").slice(1)) {
      const item = raw.trim()
      if (item.startsWith("[") || item.startsWith("{")) {
        const read = jsonCall(item)
        if ("error" in read) return read
        out.push(...read.calls)
        continue
      }
      const head = /^([A-Za-z0-9_.-]+)(\[CALL_ID\][A-Za-z0-9]*)?(\[ARGS\])?/.exec(item)
      if (head === null) return { error: "no tool name after [TOOL_CALLS]" }
      const json = onlyJson(item.slice(head[0].length))
      if ("error" in json) return json
      out.push({ name: head[1] ?? "", args: json.value })
    }
    return { calls: out }
  }
}

const bar = "[|\uFF5C]"
const sep = "\u2581"
const token = (name: string) => `<${bar}${name.split("_").join(sep)}${bar}>`
const deepseekCall = new RegExp(`${token("tool_call_begin")}([\\s\\S]*?)${token("tool_sep")}([\\s\\S]*?)(${token("tool_call_end")}|$)`, "g")

const deepseek: Format = {
  kind: "deepseek",
  label: "DeepSeek's tool-call tokens",
  read: (body) => {
    if (!new RegExp(token("tool_call_begin")).test(body) && !new RegExp(token("tool_calls_begin")).test(body)) return undefined
    const out: Array<Candidate> = []
    for (const match of body.matchAll(deepseekCall)) {
      if (match[3] === "") return { error: "a call is not closed by <｜tool▁call▁end｜>" }
      const before = (match[1] ?? "").trim()
      let after = (match[2] ?? "").trim()
      let name = before
      if (before === "function") {
        const newline = after.search(/\s/)
        name = newline < 0 ? after : after.slice(0, newline)
        after = newline < 0 ? "" : after.slice(newline).trim()
      }
      const fenced = /^```[a-zA-Z]*\s*([\s\S]*?)\s*```$/.exec(after)
      const json = onlyJson(fenced?.[1] ?? after)
      if ("error" in json) return json
      out.push({ name, args: json.value })
    }
    return out.length === 0 ? { error: "no complete call between the tool-call tokens" } : { calls: out }
  }
}

const harmony: Format = {
  kind: "harmony",
  label: "to=functions.<name>",
  read: (body) => {
    const recipients = [...body.matchAll(/to=functions\.([A-Za-z0-9_.-]+)/g)]
    if (recipients.length === 0) return undefined
    const out: Array<Candidate> = []
    for (const [i, recipient] of recipients.entries()) {
      const from = (recipient.index ?? 0) + recipient[0].length
      const to = recipients[i + 1]?.index ?? body.length
      const segment = body.slice(from, to)
      const message = segment.indexOf("<|message|>")
      if (message < 0) return { error: "no <|message|> after to=functions." }
      // Between the recipient and the message only the content type may stand.
      if (!/^\s*(<\|constrain\|>\s*json|json)?\s*$/.test(segment.slice(0, message))) return { error: "unexpected text between the recipient and <|message|>" }
      const rest = segment.slice(message + "<|message|>".length)
      const next = i + 1 < recipients.length ? rest.replace(/<\|start\|>assistant(<\|channel\|>commentary)?\s*$/, "") : rest
      const json = onlyJson(next)
      if ("error" in json) return json
      out.push({ name: recipient[1] ?? "", args: json.value })
    }
    return { calls: out }
  }
}

const fenceOnly = /^```[a-zA-Z]*\s*([\s\S]*?)\s*```$/

const fence: Format = {
  kind: "fence",
  label: "a fenced JSON block",
  read: (body) => {
    const inner = fenceOnly.exec(body)?.[1]
    if (inner === undefined || !inner.startsWith("{") && !inner.startsWith("[")) return undefined
    const json = parse(inner)
    return json.ok && namesACall(json.value) ? calls(Array.isArray(json.value) ? json.value : [json.value]) : undefined
  }
}

const bareJson: Format = {
  kind: "bare_json",
  label: "a JSON call",
  read: (body) => {
    if (!body.startsWith("{") && !body.startsWith("[")) return undefined
    const json = onlyJson(body)
    // A JSON action, or JSON that is not a call, is read by `Action` as before.
    if ("error" in json) return namesACallPrefix(body) ? json : undefined
    return namesACall(json.value) ? calls(Array.isArray(json.value) ? json.value : [json.value]) : undefined
  }
}

/** Whether JSON is shaped like a call of the `name` formats (not a JSON action, which has `tool`). */
const namesACall = (value: unknown): boolean =>
  Array.isArray(value)
    ? value.length > 0 && value.every(namesACall)
    : isObject(value) && !("tool" in value) &&
      (typeof value.name === "string" && ("arguments" in value || "parameters" in value) ||
        isObject(value.function) && typeof value.function.name === "string")

/** Whether a JSON text that does not parse starts as a call of the `name` formats. */
const namesACallPrefix = (text: string): boolean => /^[[\s]*\{\s*"(name|type|function)"\s*:/.test(text)

/** The formats, in the order they are tried; markers first, bare JSON last. */
const formats: ReadonlyArray<Format> = [harmony, deepseek, mistral, toolCallTag, functionTag, pythonTag, fence, bareJson]

/**
 * The text without its reasoning: `<think>...</think>` blocks (an unclosed one runs to the end;
 * a `</think>` with no opening ends reasoning that began with the answer) and gpt-oss's
 * analysis channel.
 */
export const stripReasoning = (text: string): { readonly text: string; readonly stripped: boolean } => {
  let out = text
  const lastClose = out.lastIndexOf("</think>")
  const firstOpen = out.indexOf("<think>")
  if (lastClose >= 0 && (firstOpen < 0 || firstOpen > lastClose)) out = out.slice(lastClose + "</think>".length)
  out = out.replace(/<(think|thinking)>[\s\S]*?(<\/\1>|$)/g, "")
  out = out.replace(/(<\|start\|>assistant)?<\|channel\|>analysis<\|message\|>[\s\S]*?(<\|end\|>|(?=<\|start\|>)|$)/g, "")
  out = out.replace(/^<\|start\|>assistant/, "").replace(/^<\|channel\|>(commentary|final)(?!\s*to=)(<\|message\|>)?/, "")
  return { text: out, stripped: out !== text }
}

const offeredNames = (tools: ReadonlyArray<Tool.Spec>, done: string): ReadonlyArray<string> => [...tools.map((t) => t.name), done]

/** A call's name as offered: exact, or `functions.<name>` for an offered `<name>` (`name_prefix`). */
export const name = (raw: string, tools: ReadonlyArray<Tool.Spec>, done: string): { readonly name: string; readonly repaired: boolean } => {
  const offered = offeredNames(tools, done)
  if (offered.includes(raw)) return { name: raw, repaired: false }
  const bare = raw.startsWith("functions.") ? raw.slice("functions.".length) : raw
  return offered.includes(bare) ? { name: bare, repaired: true } : { name: raw, repaired: false }
}

/**
 * A call's arguments as an object: an object as it is; JSON text of an object; JSON text of a
 * string that holds JSON text of an object (`double_encoded`); nothing or empty text as `{}`.
 */
export const input = (args: unknown): { readonly input: Record<string, unknown>; readonly repaired: boolean } | { readonly error: string } => {
  if (args === undefined || args === null) return { input: {}, repaired: false }
  if (isObject(args)) return { input: args, repaired: false }
  if (typeof args !== "string") return { error: "the arguments must be a JSON object" }
  if (args.trim() === "") return { input: {}, repaired: false }
  const once = parse(args)
  if (!once.ok) return { error: `the arguments are not valid JSON (${once.error})` }
  if (isObject(once.value)) return { input: once.value, repaired: false }
  if (typeof once.value === "string") {
    const twice = parse(once.value)
    if (twice.ok && isObject(twice.value)) return { input: twice.value, repaired: true }
  }
  return { error: "the arguments must be a JSON object" }
}

/**
 * Read a call written as text, after its reasoning is set aside. `json`: the model was asked for
 * a JSON action (JSON mode), so a refusal says to send one; otherwise it says to make a tool call.
 */
export const text = (raw: string, tools: ReadonlyArray<Tool.Spec>, done: string, json = false): TextResult => {
  const instead = json
    ? `answer with one JSON object {"tool": "<name>", "input": {...}}`
    : "make it a tool call with complete JSON arguments"
  const { stripped, text: rest } = stripReasoning(raw)
  const body = rest.trim().replace(/^(<\|eot_id\|>|<\|im_start\|>assistant)\s*/, "")
  const reasoning: ReadonlyArray<Kind> = stripped ? ["reasoning"] : []
  if (body === "") {
    return stripped
      ? { _tag: "Refused", refusal: { kind: "no_action", reason: `your reply held only reasoning, and a call written inside reasoning is never run; after your reasoning, ${instead}` } }
      : { _tag: "None", text: rest, repairs: [] }
  }
  for (const format of formats) {
    const read = format.read(body, tools)
    if (read === undefined) continue
    if ("error" in read) {
      return { _tag: "Refused", refusal: { kind: "bad_json", reason: `your reply held a call written as text (${format.label}), but it could not be read: ${read.error}; nothing was executed, so ${instead}` } }
    }
    if (read.calls.length !== 1) {
      const names = read.calls.map((c) => c.name).join(", ")
      return {
        _tag: "Refused",
        refusal: read.calls.length === 0
          ? { kind: "bad_json", reason: `your reply held ${format.label} with no call in it; nothing was executed, so ${instead}` }
          : {
            kind: "too_many_calls",
            reason: `your reply held ${read.calls.length} calls written as text (${format.label}: ${names}); only one call written as text runs per answer, so none was executed: ${json ? "send one JSON action per answer" : "send them as tool calls, or one per answer"}`
          }
      }
    }
    const [only] = read.calls
    if (only === undefined) break
    const named = name(only.name, tools, done)
    const args = input(only.args)
    if ("error" in args) {
      return { _tag: "Refused", refusal: { kind: "bad_json", reason: `your reply called ${named.name} as text (${format.label}), but ${args.error}; nothing was executed, so ${instead}, its arguments one JSON object` } }
    }
    const repairs: Array<Kind> = [...reasoning, format.kind, ...(read.also ?? [])]
    if (named.repaired) repairs.push("name_prefix")
    if (args.repaired) repairs.push("double_encoded")
    return { _tag: "Call", call: { tool: named.name, input: args.input, repairs } }
  }
  return { _tag: "None", text: rest, repairs: reasoning }
}
