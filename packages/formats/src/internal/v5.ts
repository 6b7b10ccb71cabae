/**
 * The decoding of behaviour 5 on: the call must be the answer. Reasoning is set aside; then the
 * first marker of any family's format in the text opens the call, its frames must all close, and
 * after them only end-of-turn tokens may follow (prose before the call is allowed, prose after it
 * means the call was quoted). Forms with no marker (bare JSON, a fenced block, a Python dict, a
 * pythonic list) count only as the whole text. A call seen word for word in a tool result is an
 * echo, a `done` beside other prose is never taken, and arguments holding special tokens are refused.
 */
import * as Literal from "./literal.js"
import type * as Tool from "./spec.js"
import * as V3 from "./v3.js"

/** A repair of this decoding, recorded with the decision. */
export type Kind =
  | V3.Kind
  /** Kimi K2's `<|tool_call_begin|>functions.name:0<|tool_call_argument_begin|>{...}<|tool_call_end|>`. */
  | "kimi"
  /** MiniMax's `<minimax:tool_call><invoke name=...><parameter name=...>`. */
  | "minimax"
  /** Gemma 4's `<|tool_call>call:name{key:<|"|>value<|"|>}<tool_call|>`. */
  | "gemma"
  /** Granite's `<|tool_call|>[{...}]`. */
  | "granite"
  /** Pythonic calls `[name(a=1)]`, bare or in `<|tool_call_start|>` (LFM2) or `<|python_start|>` (Llama 4). */
  | "pythonic"
  /** The whole text a `{"tool_calls": [...]}` object. */
  | "tool_calls_object"
  /** The whole text a Python dict literal (single quotes, `True`, `None`) with one reading. */
  | "python_dict"
  /** A JSON call's arguments under `args`. */
  | "args_key"

interface Candidate {
  readonly name: string
  readonly args: unknown
  readonly also?: ReadonlyArray<Kind>
}

/** The calls read from a format's first marker on, and where they end; or what could not be read. */
type Read = { readonly calls: ReadonlyArray<Candidate>; readonly end: number } | { readonly error: string }

interface Format {
  readonly kind: Kind
  readonly label: string
  /** Where the format's first marker stands in the text, -1 if nowhere. */
  readonly find: (text: string) => number
  /** Read the calls from the marker on (`text` starts with it). */
  readonly read: (text: string, tools: ReadonlyArray<Tool.Spec>) => Read
}

/** End-of-turn and end-of-section tokens: all that may follow a call. */
const trailing = /^(?:\s|<\|eot_id\|>|<\|eom_id\|>|<\|im_end\|>|<\|end\|>|<\|call\|>|<\|return\|>|<\/s>|<\|end_of_text\|>|<turn\|>|<end_of_turn>|<\|tool_calls_section_end\|>|<[|｜]end▁of▁sentence[|｜]>|<[|｜]tool▁calls▁end[|｜]>)*$/

const skip = (text: string, at: number): number => {
  let i = at
  while (i < text.length && /\s/.test(text[i] ?? "")) i++
  return i
}

/** A JSON value at `at`: balanced, and valid. */
const jsonAt = (text: string, at: number): { readonly value: unknown; readonly end: number } | { readonly error: string } => {
  const i = skip(text, at)
  const found = V3.leadingJson(text.slice(i))
  if (found === undefined) return { error: text[i] === "{" || text[i] === "[" ? "the JSON is cut off or its brackets do not balance" : "no JSON arguments where they belong" }
  const value = V3.parse(found.json)
  return value.ok ? { value: value.value, end: i + found.json.length } : { error: `the JSON is not valid (${value.error})` }
}

const argKeys = ["arguments", "parameters", "args"]

/** A call object of the JSON formats: `{"name", "arguments"|"parameters"|"args"}`, or `{"type": "function", "function": {...}}`. */
const candidate = (value: unknown): Candidate | string => {
  if (!V3.isObject(value)) return "a call must be a JSON object"
  const inner = V3.isObject(value.function) && typeof value.function.name === "string" ? value.function : value
  if (typeof inner.name !== "string") return "the call has no \"name\""
  const keys = Object.keys(inner).filter((key) => !["name", "type", "id", "function", ...argKeys].includes(key))
  if (keys.length > 0) return `the call has keys other than "name" and "arguments" (${keys.map((key) => JSON.stringify(key)).join(", ")})`
  const given = argKeys.filter((key) => key in inner)
  if (given.length > 1) return `the call gives its arguments twice (${given.join(", ")})`
  const [key] = given
  return { name: inner.name, args: key === undefined ? undefined : inner[key], ...(key === "args" ? { also: ["args_key"] } : {}) }
}

const candidates = (value: unknown): { readonly error: string } | Array<Candidate> => {
  const out: Array<Candidate> = []
  for (const item of Array.isArray(value) ? value : [value]) {
    const c = candidate(item)
    if (typeof c === "string") return { error: c }
    out.push(c)
  }
  return out
}

/** Whether JSON is shaped like a call (not a JSON action, which has `tool`). */
const namesACall = (value: unknown): boolean =>
  Array.isArray(value)
    ? value.length > 0 && value.every(namesACall)
    : V3.isObject(value) && !("tool" in value) &&
      (typeof value.name === "string" && argKeys.some((key) => key in value) ||
        V3.isObject(value.function) && typeof value.function.name === "string")

const maxCalls = 64

/** Read blocks one after another: `one` reads a block at `at` (or says none starts there). */
const blocks = (text: string, one: (at: number) => Read | undefined): Read => {
  const calls: Array<Candidate> = []
  let at = 0
  for (;;) {
    const read = one(at)
    if (read === undefined) break
    if ("error" in read) return read
    calls.push(...read.calls)
    // Past this many, reading on decides nothing (several calls as text are refused) and only costs time.
    if (calls.length > maxCalls) return { error: `more than ${maxCalls} calls are written as text` }
    at = read.end
    const next = skip(text, at)
    if (one(next) === undefined) break
    at = next
  }
  return { calls, end: at }
}

const at = (pattern: RegExp) => (text: string): number => pattern.exec(text)?.index ?? -1
const sticky = (pattern: RegExp, text: string, from: number): RegExpExecArray | null => {
  const re = new RegExp(pattern.source, "y")
  re.lastIndex = from
  return re.exec(text)
}

/** `<function=name>` then `<parameter=p>value</parameter>` items or a JSON object, closed by `</function>`. */
const xmlFunction = (text: string, from: number, tools: ReadonlyArray<Tool.Spec>): Read => {
  const head = sticky(/<function=([^>\n]+)>/, text, from)
  if (head === null) return { error: "a <function=...> tag was expected" }
  const name = (head[1] ?? "").trim()
  const open = from + head[0].length
  const close = text.indexOf("</function>", open)
  if (close < 0) return { error: `the <function=${name}> block is not closed by </function> (a cut answer may be missing a parameter)` }
  const body = text.slice(open, close)
  const end = close + "</function>".length
  if (body.trim().startsWith("{")) {
    const json = jsonAt(body, 0)
    if ("error" in json) return json
    return body.slice(json.end).trim() === "" ? { calls: [{ name, args: json.value }], end } : { error: "text follows the JSON in <function=...>" }
  }
  const args = new Map<string, unknown>()
  const parts = body.split(/<parameter=/)
  if ((parts[0] ?? "").trim() !== "") return { error: "text before the first <parameter=...>" }
  for (const part of parts.slice(1)) {
    const gt = part.indexOf(">")
    if (gt < 0) return { error: "a <parameter=...> tag is not closed" }
    const key = part.slice(0, gt).trim()
    let value = part.slice(gt + 1)
    const closing = value.indexOf("</parameter>")
    if (closing >= 0) {
      if (value.slice(closing + "</parameter>".length).trim() !== "") return { error: `text follows </parameter> of ${key}` }
      value = value.slice(0, closing)
    }
    if (args.has(key)) return { error: `parameter ${key} is given twice` }
    args.set(key, V3.typed(value.replace(/^\n+/, "").replace(/\n+$/, ""), V3.propertyType(tools, name, key)))
  }
  return { calls: [{ name, args: Object.fromEntries(args) }], end }
}

const toolCallTag: Format = {
  kind: "tool_call_tag",
  label: "a <tool_call> block",
  find: at(/<tool_call(?:>|\s+name=)/),
  read: (text, tools) =>
    blocks(text, (from) => {
      const head = sticky(/<tool_call(?:\s+name=(?:"([^"\n]*)"|'([^'\n]*)'))?\s*>/, text, from)
      if (head === null) return undefined
      const open = from + head[0].length
      const close = text.indexOf("</tool_call>", open)
      if (close < 0) return { error: "a <tool_call> block is not closed by </tool_call>" }
      const inner = text.slice(open, close)
      const end = close + "</tool_call>".length
      const named = head[1] ?? head[2]
      const start = skip(inner, 0)
      if (named === undefined && inner.startsWith("<function=", start)) {
        const read = xmlFunction(inner, start, tools)
        if ("error" in read) return read
        if (inner.slice(read.end).trim() !== "") return { error: "text follows </function> in the <tool_call> block" }
        return { calls: read.calls.map((c) => ({ ...c, also: ["xml_function"] })), end }
      }
      const json = jsonAt(inner, start)
      if ("error" in json) return json
      if (inner.slice(json.end).trim() !== "") return { error: "text follows the JSON in the <tool_call> block" }
      if (named !== undefined) return { calls: [{ name: named, args: json.value }], end }
      const calls = candidates(json.value)
      return "error" in calls ? calls : { calls, end }
    })
}

const functionTag: Format = {
  kind: "xml_function",
  label: "a <function=...> block",
  find: at(/<function=/),
  read: (text, tools) =>
    blocks(text, (from) => {
      if (!text.startsWith("<function=", from)) return undefined
      const read = xmlFunction(text, from, tools)
      if ("error" in read) return read
      // A closing </tool_call> whose opening tag the model left out changes nothing.
      const stray = sticky(/\s*<\/tool_call>/, text, read.end)
      return stray === null ? read : { ...read, end: read.end + stray[0].length }
    })
}

// One run of spaces between the header's parts at most, so a failing match never backtracks over long runs.
const harmonyHead = /(?:<\|start\|>)?(?:assistant)?(?:<\|channel\|>)?(?:commentary)?[ \t]*to=functions\.([A-Za-z0-9_.-]+)(?:<\|channel\|>commentary)?[ \t]*(?:<\|constrain\|>)?(?:json)?(?:<\|message\|>)?/

/** Where the first `to=functions.` header starts: the recipient, and the role and channel tokens just before it. */
const findHarmony = (text: string): number => {
  const at = text.indexOf("to=functions.")
  if (at < 0) return -1
  const window = text.slice(Math.max(0, at - 48), at)
  const prefix = /(?:<\|start\|>)?(?:assistant)?(?:<\|channel\|>)?(?:commentary)?[ \t]*$/.exec(window)
  return at - (prefix?.[0].length ?? 0)
}

const harmony: Format = {
  kind: "harmony",
  label: "gpt-oss's to=functions.<name>",
  find: findHarmony,
  read: (text) =>
    blocks(text, (from) => {
      const head = sticky(harmonyHead, text, from)
      if (head === null) return undefined
      const json = jsonAt(text, from + head[0].length)
      if ("error" in json) return json
      const call = sticky(/\s*<\|call\|>/, text, json.end)
      return { calls: [{ name: head[1] ?? "", args: json.value }], end: call === null ? json.end : json.end + call[0].length }
    })
}

const bar = "[|\uFF5C]"
const sep = "\u2581"
const token = (name: string) => `<${bar}${name.split("_").join(sep)}${bar}>`

const deepseek: Format = {
  kind: "deepseek",
  label: "DeepSeek's tool-call tokens",
  find: at(new RegExp(`${token("tool_calls_begin")}|${token("tool_call_begin")}`)),
  read: (text) => {
    const begin = sticky(new RegExp(`${token("tool_calls_begin")}\\s*`), text, 0)
    const offset = begin === null ? 0 : begin[0].length
    const read = blocks(text, (from) => {
      const at = Math.max(from, offset)
      const head = sticky(new RegExp(token("tool_call_begin")), text, at)
      if (head === null) return undefined
      const close = new RegExp(token("tool_call_end")).exec(text.slice(at))
      if (close === null) return { error: "a call is not closed by <｜tool▁call▁end｜>" }
      const inner = text.slice(at + head[0].length, at + close.index)
      const split = new RegExp(token("tool_sep")).exec(inner)
      if (split === null) return { error: "a call has no <｜tool▁sep｜>" }
      let name = inner.slice(0, split.index).trim()
      let args = inner.slice(split.index + split[0].length).trim()
      if (name === "function") {
        const space = args.search(/\s/)
        name = space < 0 ? args : args.slice(0, space)
        args = space < 0 ? "" : args.slice(space).trim()
      }
      const fenced = /^```[a-zA-Z]*\s*([\s\S]*?)\s*```$/.exec(args)
      const body = fenced?.[1] ?? args
      const json = jsonAt(body, 0)
      if ("error" in json) return json
      if (body.slice(json.end).trim() !== "") return { error: "text follows the call's JSON" }
      return { calls: [{ name, args: json.value }], end: at + close.index + close[0].length }
    })
    return read
  }
}

const kimi: Format = {
  kind: "kimi",
  label: "Kimi's tool-call tokens",
  find: at(/<\|tool_calls_section_begin\|>|<\|tool_call_begin\|>/),
  read: (text) => {
    const offset = text.startsWith("<|tool_calls_section_begin|>") ? "<|tool_calls_section_begin|>".length : 0
    return blocks(text, (from) => {
      const head = sticky(/\s*<\|tool_call_begin\|>([^<]*)<\|tool_call_argument_begin\|>/, text, Math.max(from, offset))
      if (head === null) return sticky(/\s*<\|tool_call_begin\|>/, text, Math.max(from, offset)) === null ? undefined : { error: "a call has no <|tool_call_argument_begin|>" }
      const json = jsonAt(text, Math.max(from, offset) + head[0].length)
      if ("error" in json) return json
      const close = sticky(/\s*<\|tool_call_end\|>/, text, json.end)
      if (close === null) return { error: "a call is not closed by <|tool_call_end|>" }
      const id = (head[1] ?? "").trim()
      const name = /^(?:functions\.)?([^:\s]+):\d+$/.exec(id)?.[1] ?? id
      return { calls: [{ name, args: json.value }], end: json.end + close[0].length }
    })
  }
}

const mistral: Format = {
  kind: "mistral",
  label: "[TOOL_CALLS]",
  find: at(/\[TOOL_CALLS\]/),
  read: (text) =>
    blocks(text, (from) => {
      if (!text.startsWith("[TOOL_CALLS]", from)) return undefined
      const start = skip(text, from + "[TOOL_CALLS]".length)
      if (text[start] === "[" || text[start] === "{") {
        const json = jsonAt(text, start)
        if ("error" in json) return json
        const calls = candidates(json.value)
        return "error" in calls ? calls : { calls, end: json.end }
      }
      const head = sticky(/([A-Za-z0-9_.-]+)(?:\[CALL_ID\][A-Za-z0-9]*)?(?:\[ARGS\])?/, text, start)
      if (head === null || head[0] === "") return { error: "no tool name after [TOOL_CALLS]" }
      const json = jsonAt(text, start + head[0].length)
      return "error" in json ? json : { calls: [{ name: head[1] ?? "", args: json.value }], end: json.end }
    })
}

const minimax: Format = {
  kind: "minimax",
  label: "a <minimax:tool_call> block",
  find: at(/<minimax:tool_call>/),
  read: (text, tools) =>
    blocks(text, (from) => {
      if (!text.startsWith("<minimax:tool_call>", from)) return undefined
      const close = text.indexOf("</minimax:tool_call>", from)
      if (close < 0) return { error: "the block is not closed by </minimax:tool_call>" }
      const inner = text.slice(from + "<minimax:tool_call>".length, close)
      const calls: Array<Candidate> = []
      let i = skip(inner, 0)
      while (i < inner.length) {
        const head = sticky(/<invoke\s+name=(?:"([^"\n]*)"|'([^'\n]*)'|([^\s>]+))\s*>/, inner, i)
        if (head === null) return { error: "text other than <invoke name=...> in the block" }
        const name = head[1] ?? head[2] ?? head[3] ?? ""
        const end = inner.indexOf("</invoke>", i)
        if (end < 0) return { error: `<invoke name="${name}"> is not closed by </invoke>` }
        const body = inner.slice(i + head[0].length, end)
        const args = new Map<string, unknown>()
        let j = skip(body, 0)
        while (j < body.length) {
          const param = sticky(/<parameter\s+name=(?:"([^"\n]*)"|'([^'\n]*)'|([^\s>]+))\s*>/, body, j)
          if (param === null) return { error: `text other than <parameter name=...> in <invoke name="${name}">` }
          const key = param[1] ?? param[2] ?? param[3] ?? ""
          const stop = body.indexOf("</parameter>", j)
          if (stop < 0) return { error: `the parameter ${key} is not closed by </parameter>` }
          if (args.has(key)) return { error: `parameter ${key} is given twice` }
          args.set(key, V3.typed(body.slice(j + param[0].length, stop).replace(/^\n+/, "").replace(/\n+$/, ""), V3.propertyType(tools, name, key)))
          j = skip(body, stop + "</parameter>".length)
        }
        calls.push({ name, args: Object.fromEntries(args) })
        i = skip(inner, end + "</invoke>".length)
      }
      return { calls, end: close + "</minimax:tool_call>".length }
    })
}

const gemma: Format = {
  kind: "gemma",
  label: "Gemma's <|tool_call>",
  find: at(/<\|tool_call>/),
  read: (text) =>
    blocks(text, (from) => {
      if (!text.startsWith("<|tool_call>", from)) return undefined
      const head = sticky(/\s*call:([A-Za-z_][\w.-]*)/, text, from + "<|tool_call>".length)
      if (head === null) return { error: "no call:<name> after <|tool_call>" }
      const args = Literal.gemma(text, from + "<|tool_call>".length + head[0].length)
      if ("error" in args) return args
      const close = sticky(/\s*<tool_call\|>/, text, args.end)
      if (close === null) return { error: "the call is not closed by <tool_call|>" }
      return { calls: [{ name: head[1] ?? "", args: args.value }], end: args.end + close[0].length }
    })
}

const granite: Format = {
  kind: "granite",
  label: "<|tool_call|>",
  find: at(/<\|tool_call\|>/),
  read: (text) =>
    blocks(text, (from) => {
      if (!text.startsWith("<|tool_call|>", from)) return undefined
      const json = jsonAt(text, from + "<|tool_call|>".length)
      if ("error" in json) return json
      const calls = candidates(json.value)
      return "error" in calls ? calls : { calls, end: json.end }
    })
}

const pythonTag: Format = {
  kind: "python_tag",
  label: "<|python_tag|>",
  find: at(/<\|python_tag\|>/),
  read: (text) => {
    const calls: Array<Candidate> = []
    let i = "<|python_tag|>".length
    for (;;) {
      const json = jsonAt(text, i)
      if ("error" in json) return json
      const read = candidates(json.value)
      if ("error" in read) return read
      calls.push(...read)
      const more = sticky(/\s*;\s*(?=\{)/, text, json.end)
      if (more === null) return { calls, end: json.end }
      i = json.end + more[0].length
    }
  }
}

const wrappers: ReadonlyArray<readonly [string, string]> = [["<|tool_call_start|>", "<|tool_call_end|>"], ["<|python_start|>", "<|python_end|>"]]

const pythonicWrapped: Format = {
  kind: "pythonic",
  label: "pythonic calls [name(a=1)]",
  find: at(/<\|tool_call_start\|>|<\|python_start\|>/),
  read: (text) =>
    blocks(text, (from) => {
      const wrapper = wrappers.find(([open]) => text.startsWith(open, from))
      if (wrapper === undefined) return undefined
      const read = Literal.pythonCalls(text, from + wrapper[0].length)
      if ("error" in read) return read
      const close = sticky(new RegExp(`\\s*${wrapper[1].replace(/[|]/g, "\\|")}`), text, read.end)
      if (close === null) return { error: `the calls are not closed by ${wrapper[1]}` }
      return { calls: read.value, end: read.end + close[0].length }
    })
}

/** The marker formats; the one whose marker comes first in the text reads it (on a tie, the first listed). */
const formats: ReadonlyArray<Format> = [harmony, deepseek, kimi, mistral, minimax, gemma, granite, toolCallTag, functionTag, pythonTag, pythonicWrapped]

/** The forms with no marker, read only when they are the whole text. */
const whole = (body: string): { readonly kind: Kind; readonly label: string; readonly read: Read } | undefined => {
  const fenced = body.endsWith("```") ? /^```[a-zA-Z]*\s*([\s\S]*?)\s*```$/.exec(body)?.[1] : undefined
  if (fenced !== undefined && (fenced.startsWith("{") || fenced.startsWith("["))) {
    const json = V3.parse(fenced)
    if (json.ok && namesACall(json.value)) {
      const calls = candidates(json.value)
      return { kind: "fence", label: "a fenced JSON block", read: "error" in calls ? calls : { calls, end: body.length } }
    }
    return undefined
  }
  if (body.startsWith("[") && /^\[\s*[A-Za-z_][\w.-]*\(/.test(body)) {
    const read = Literal.pythonCalls(body, 0)
    return "error" in read ? undefined : { kind: "pythonic", label: "pythonic calls [name(a=1)]", read: { calls: read.value, end: read.end } }
  }
  if (!body.startsWith("{") && !body.startsWith("[")) return undefined
  const json = jsonAt(body, 0)
  if ("error" in json) {
    const dict = Literal.python(body, 0)
    if (!("error" in dict) && namesACall(dict.value)) {
      const calls = candidates(dict.value)
      return { kind: "python_dict", label: "a Python dict", read: "error" in calls ? calls : { calls, end: dict.end } }
    }
    // JSON that starts as a call but does not parse is a call that could not be read; any other is a JSON action's.
    return /^[[\s]*\{\s*"(name|type|function|tool_calls)"\s*:/.test(body) ? { kind: "bare_json", label: "a JSON call", read: json } : undefined
  }
  const value = json.value
  if (V3.isObject(value) && Object.keys(value).length === 1 && Array.isArray(value.tool_calls)) {
    const calls = candidates(value.tool_calls)
    return { kind: "tool_calls_object", label: "a {\"tool_calls\": [...]} object", read: "error" in calls ? calls : { calls, end: json.end } }
  }
  if (!namesACall(value)) return undefined
  const calls = candidates(value)
  return { kind: "bare_json", label: "a JSON call", read: "error" in calls ? calls : { calls, end: json.end } }
}

/** The text without its reasoning: as behaviours 3 and 4 set it aside, and gpt-oss's channels when a server stripped their tokens (`analysis...assistantfinal...`). */
export const stripReasoning = (text: string): { readonly text: string; readonly stripped: boolean } => {
  // A role header or a final channel's header is not reasoning.
  const first = V3.stripReasoning(text.replace(/^\s*<\|start\|>assistant(?!<\|channel\|>analysis)/, "").replace(/^<\|channel\|>final<\|message\|>/, ""))
  const residue = /^\s*analysis[\s\S]*?assistant(?=final|commentary)/.exec(first.text)
  if (residue === null) return first
  const rest = first.text.slice(residue[0].length).replace(/^final/, "")
  return { text: rest, stripped: true }
}

/** Special tokens of the model families, and U+FFFD (a broken decode). */
const specialToken = /<\|[^|<>\s]{1,40}\|>|<\|[a-z_]{2,30}>|<[a-z_]{2,30}\|>|<｜[^｜<>\n]{1,40}｜>|\[(?:\/?TOOL_CALLS|ARGS|CALL_ID|\/?TOOL_RESULTS|\/?AVAILABLE_TOOLS|\/?INST|\/?THINK)\]|\uFFFD/g

/** The special tokens an input's keys and texts hold (each named once, U+FFFD as such), in the order found. */
export const leaked = (input: unknown): ReadonlyArray<string> => {
  const found = new Set<string>()
  const walk = (value: unknown, depth: number): void => {
    if (depth > 100) return
    if (typeof value === "string") {
      for (const m of value.matchAll(specialToken)) found.add(m[0] === "\uFFFD" ? "U+FFFD" : m[0])
    } else if (Array.isArray(value)) for (const item of value) walk(item, depth + 1)
    else if (V3.isObject(value)) {
      for (const [key, item] of Object.entries(value)) {
        walk(key, depth + 1)
        walk(item, depth + 1)
      }
    }
  }
  walk(input, 0)
  return [...found]
}

/** What a refusal tells the model to send instead, in the form its mode asks for, with the tool's parameters when it names an offered one. */
export const expected = (tool: string | undefined, tools: ReadonlyArray<Tool.Spec>, done: string, json: boolean): string => {
  const spec = tools.find((t) => t.name === tool)
  const example = tool === done ? `{"summary": "..."}` : spec === undefined ? undefined : exampleInput(spec)
  if (json) return `answer with only one JSON object: {"tool": "${example === undefined ? "<name>" : tool}", "input": ${example ?? "{...}"}}`
  return example === undefined
    ? "make it a tool call through the API's tool calls (not text), its arguments one JSON object"
    : `make it a tool call through the API's tool calls (not text): the function "${tool}" with arguments ${example}`
}

const placeholder: Record<string, string> = { string: "\"...\"", number: "0", integer: "0", boolean: "false", array: "[]", object: "{}" }

const exampleInput = (spec: Tool.Spec): string => {
  const properties = V3.isObject(spec.parameters["properties"]) ? spec.parameters["properties"] : {}
  const required = Array.isArray(spec.parameters["required"]) ? spec.parameters["required"].filter((k): k is string => typeof k === "string") : []
  const keys = (required.length > 0 ? required : Object.keys(properties)).slice(0, 4)
  const parts = keys.map((key) => {
    const schema = properties[key]
    const type = V3.isObject(schema) && typeof schema.type === "string" ? schema.type : "string"
    return `${JSON.stringify(key)}: ${placeholder[type] ?? "\"...\""}`
  })
  return parts.length === 0 ? "{}" : `{${parts.join(", ")}}`
}

/** What decoding needs besides the text. */
export interface Context {
  readonly tools: ReadonlyArray<Tool.Spec>
  readonly done: string
  /** The model was asked for a JSON action (JSON mode): refusals show that form. */
  readonly json: boolean
  /** The goal's tool results the model was shown: a call found in one verbatim is an echo. */
  readonly results: ReadonlyArray<string>
}

type Refusal = V3.Refusal
type TextResult =
  | { readonly _tag: "Call"; readonly call: { readonly tool: string; readonly input: Record<string, unknown>; readonly repairs: ReadonlyArray<Kind> } }
  | { readonly _tag: "Refused"; readonly refusal: Refusal; readonly tool?: string }
  | { readonly _tag: "None"; readonly text: string; readonly repairs: ReadonlyArray<Kind> }

const refused = (kind: Refusal["kind"], reason: string): TextResult => ({ _tag: "Refused", refusal: { kind, reason } })

/** Whether `block` stands in a result, as written or as a JSON string holds it. */
const echoed = (block: string, results: ReadonlyArray<string>): boolean => {
  const escaped = JSON.stringify(block).slice(1, -1)
  return results.some((result) => result.includes(block) || result.includes(escaped))
}

/** Read a call written as text: only when it is the answer. */
export const text = (raw: string, { done, json, results, tools }: Context): TextResult => {
  const { stripped, text: rest } = stripReasoning(raw)
  const body = rest.trim().replace(/^(<\|eot_id\|>|<\|im_start\|>assistant)\s*/, "")
  const reasoning: ReadonlyArray<Kind> = stripped ? ["reasoning"] : []
  const instead = (tool?: string) => expected(tool, tools, done, json)
  if (body === "") {
    return stripped
      ? refused("no_action", `your reply held only reasoning, and a call written inside reasoning is never run; after your reasoning, ${instead()}`)
      : { _tag: "None", text: rest, repairs: [] }
  }
  let first: { readonly format: Format; readonly start: number } | undefined
  for (const format of formats) {
    const start = format.find(body)
    if (start >= 0 && (first === undefined || start < first.start)) first = { format, start }
  }
  const found = first === undefined
    ? (() => {
      const read = whole(body)
      return read === undefined ? undefined : { ...read, start: 0 }
    })()
    : { kind: first.format.kind, label: first.format.label, start: first.start, read: first.format.read(body.slice(first.start), tools) }
  if (found === undefined) return { _tag: "None", text: rest, repairs: reasoning }
  const { kind, label, read, start } = found
  if ("error" in read) return refused("bad_json", `your reply held a call written as text (${label}), but it could not be read: ${read.error}; nothing was executed, so ${instead()}`)
  const end = start + read.end
  const after = body.slice(end)
  const [only] = read.calls
  if (!trailing.test(after)) {
    return refused(
      "no_action",
      `your reply held a call written as text (${label}${only === undefined ? "" : `: ${only.name}`}) with more text after it, so it was read as quoted, not made, and nothing was executed; a call written as text counts only when it ends the reply; to make it, ${instead(only?.name)}`
    )
  }
  if (read.calls.length !== 1 || only === undefined) {
    return read.calls.length === 0
      ? refused("bad_json", `your reply held ${label} with no call in it; nothing was executed, so ${instead()}`)
      : refused(
        "too_many_calls",
        `your reply held ${read.calls.length} calls written as text (${label}: ${read.calls.map((c) => c.name).join(", ")}); only one call written as text runs per answer, so none was executed: ${json ? "send one JSON action per answer" : "send them as tool calls, or one per answer"}`
      )
  }
  if (echoed(body.slice(start, end).trim(), results)) {
    return refused(
      "no_action",
      `the call in your reply (${label}: ${only.name}) stands word for word in a tool result of this goal (text a tool read, such as a file's), so it was taken as an echo of that text, not as your call, and was not run; if you mean to make it, ${instead(only.name)}`
    )
  }
  const named = V3.name(only.name, tools, done)
  const args = V3.input(only.args)
  if ("error" in args) {
    return refused("bad_json", `your reply called ${named.name} as text (${label}), but ${args.error}; nothing was executed, so ${instead(named.name)}`)
  }
  const tokens = leaked(args.input)
  if (tokens.length > 0) {
    return refused(
      "bad_json",
      `your reply called ${named.name} as text (${label}), but its arguments hold a model's special tokens (${tokens.slice(0, 5).join(", ")}), which leak from a broken chat template or decode; nothing was executed, so ${instead(named.name)}`
    )
  }
  if (named.name === done && body.slice(0, start).replace(/<\|im_start\|>assistant|<\|start\|>assistant/g, "").trim() !== "") {
    return refused(
      "no_action",
      `your reply held a ${done} call written as text beside other text, so the goal was not ended (a ${done} among other words may be quoted); to end the goal, ${instead(done)}, and nothing else`
    )
  }
  const repairs: Array<Kind> = [...reasoning, kind, ...(only.also ?? [])]
  if (named.repaired) repairs.push("name_prefix")
  if (args.repaired) repairs.push("double_encoded")
  return { _tag: "Call", call: { tool: named.name, input: args.input, repairs } }
}
