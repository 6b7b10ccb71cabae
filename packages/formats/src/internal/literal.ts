/**
 * Readers of the non-JSON argument notations some families write: Python literals (a dict with
 * single quotes, pythonic calls `[name(a=1)]`) and Gemma's `{key:<|"|>text<|"|>}`. Each reads
 * exactly one grammar, with one reading of every text it accepts; anything else (an expression,
 * a string prefix, an escape it does not know, an unclosed bracket) is an error, never a guess.
 */

/** A value read from `text` at `at`, and where it ends; or why it could not be read. */
export type Read<A> = { readonly value: A; readonly end: number } | { readonly error: string }

const space = (text: string, at: number): number => {
  let i = at
  while (i < text.length && /\s/.test(text[i] ?? "")) i++
  return i
}

const escapes: Record<string, string> = { "\\": "\\", "'": "'", "\"": "\"", n: "\n", t: "\t", r: "\r" }

/** A Python string literal (no prefixes, no triple quotes), its common escapes only. */
const pyString = (text: string, at: number): Read<string> => {
  const quote = text[at]
  if (text.startsWith(quote === "'" ? "'''" : "\"\"\"", at)) return { error: "a triple-quoted string is not read" }
  let out = ""
  for (let i = at + 1; i < text.length; i++) {
    const c = text[i] ?? ""
    if (c === quote) return { value: out, end: i + 1 }
    if (c === "\n") return { error: "a string runs past the end of its line" }
    if (c === "\\") {
      const next = escapes[text[i + 1] ?? ""]
      if (next === undefined) return { error: `the escape \\${text[i + 1] ?? ""} is not read` }
      out += next
      i++
      continue
    }
    out += c
  }
  return { error: "a string is not closed" }
}

const number = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?(?![\w.])/

/** A Python literal: a string, number, `True`/`False`/`None`, a list or a dict with string keys. */
export const python = (text: string, from: number, depth = 0): Read<unknown> => {
  if (depth > 64) return { error: "the value nests too deep" }
  const at = space(text, from)
  const c = text[at]
  if (c === "'" || c === "\"") return pyString(text, at)
  for (const [word, value] of [["True", true], ["False", false], ["None", null]] as const) {
    if (text.startsWith(word, at) && !/\w/.test(text[at + word.length] ?? "")) return { value, end: at + word.length }
  }
  const num = number.exec(text.slice(at, at + 64))
  if (num !== null) return { value: Number(num[0]), end: at + num[0].length }
  if (c === "[") {
    const items = sequence(text, at + 1, "]", (i) => python(text, i, depth + 1))
    return items
  }
  if (c === "{") {
    const out = new Map<string, unknown>()
    let i = space(text, at + 1)
    if (text[i] === "}") return { value: {}, end: i + 1 }
    for (;;) {
      const key = python(text, i, depth + 1)
      if ("error" in key) return key
      if (typeof key.value !== "string") return { error: "a dict key is not a string" }
      i = space(text, key.end)
      if (text[i] !== ":") return { error: "a dict entry has no ':'" }
      const value = python(text, i + 1, depth + 1)
      if ("error" in value) return value
      if (out.has(key.value)) return { error: `the key ${key.value} is given twice` }
      out.set(key.value, value.value)
      i = space(text, value.end)
      if (text[i] === ",") i = space(text, i + 1)
      else if (text[i] !== "}") return { error: "a dict is not closed" }
      if (text[i] === "}") return { value: Object.fromEntries(out), end: i + 1 }
    }
  }
  return { error: "a value is not a Python literal" }
}

/** Items read by `item`, separated by commas (one trailing comma allowed), up to `close`. */
const sequence = (text: string, from: number, close: string, item: (at: number) => Read<unknown>): Read<Array<unknown>> => {
  const out: Array<unknown> = []
  let i = space(text, from)
  if (text[i] === close) return { value: out, end: i + 1 }
  for (;;) {
    const read = item(i)
    if ("error" in read) return read
    out.push(read.value)
    i = space(text, read.end)
    if (text[i] === ",") i = space(text, i + 1)
    else if (text[i] !== close) return { error: `a list is not closed by ${close}` }
    if (text[i] === close) return { value: out, end: i + 1 }
  }
}

/** A pythonic call list `[name(a=1, b='x'), ...]`: each call's name and keyword arguments. */
export const pythonCalls = (text: string, from: number): Read<Array<{ readonly name: string; readonly args: Record<string, unknown> }>> => {
  const at = space(text, from)
  if (text[at] !== "[") return { error: "a pythonic call list starts with [" }
  const calls = sequence(text, at + 1, "]", (i) => {
    const head = /^([A-Za-z_][\w.-]*)\(/.exec(text.slice(i, i + 200))
    if (head === null) return { error: "a call is not written name(...)" }
    const args = new Map<string, unknown>()
    let j = space(text, i + head[0].length)
    if (text[j] === ")") return { value: { name: head[1] ?? "", args: {} }, end: j + 1 }
    for (;;) {
      const key = /^([A-Za-z_]\w*)\s*=/.exec(text.slice(j, j + 200))
      if (key === null) return { error: `an argument of ${head[1] ?? ""} is not written key=value` }
      const value = python(text, j + key[0].length)
      if ("error" in value) return value
      const name = key[1] ?? ""
      if (args.has(name)) return { error: `the argument ${name} is given twice` }
      args.set(name, value.value)
      j = space(text, value.end)
      if (text[j] === ",") j = space(text, j + 1)
      else if (text[j] !== ")") return { error: `the call ${head[1] ?? ""}(...) is not closed` }
      if (text[j] === ")") return { value: { name: head[1] ?? "", args: Object.fromEntries(args) }, end: j + 1 }
    }
  })
  return "error" in calls ? calls : { value: calls.value as Array<{ name: string; args: Record<string, unknown> }>, end: calls.end }
}

const quote = "<|\"|>"

/**
 * A Gemma 4 value: `<|"|>text<|"|>` (a string, taken as written), a number, `true`/`false`/`null`,
 * `[...]`, or `{key:value,...}` with bare or quoted keys.
 */
export const gemma = (text: string, from: number, depth = 0): Read<unknown> => {
  if (depth > 64) return { error: "the value nests too deep" }
  const at = space(text, from)
  if (text.startsWith(quote, at)) {
    const close = text.indexOf(quote, at + quote.length)
    return close < 0 ? { error: `a string is not closed by ${quote}` } : { value: text.slice(at + quote.length, close), end: close + quote.length }
  }
  for (const [word, value] of [["true", true], ["false", false], ["null", null]] as const) {
    if (text.startsWith(word, at) && !/\w/.test(text[at + word.length] ?? "")) return { value, end: at + word.length }
  }
  const num = number.exec(text.slice(at, at + 64))
  if (num !== null) return { value: Number(num[0]), end: at + num[0].length }
  if (text[at] === "[") return sequence(text, at + 1, "]", (i) => gemma(text, i, depth + 1))
  if (text[at] === "{") {
    const out = new Map<string, unknown>()
    let i = space(text, at + 1)
    if (text[i] === "}") return { value: {}, end: i + 1 }
    for (;;) {
      let key: string
      if (text.startsWith(quote, i)) {
        const read = gemma(text, i, depth + 1)
        if ("error" in read) return read
        key = String(read.value)
        i = space(text, read.end)
      } else {
        const bare = /^[A-Za-z_][\w.-]*/.exec(text.slice(i, i + 200))
        if (bare === null) return { error: "a key is neither a name nor a quoted string" }
        key = bare[0]
        i = space(text, i + bare[0].length)
      }
      if (text[i] !== ":") return { error: `the key ${key} has no ':'` }
      const value = gemma(text, i + 1, depth + 1)
      if ("error" in value) return value
      if (out.has(key)) return { error: `the key ${key} is given twice` }
      out.set(key, value.value)
      i = space(text, value.end)
      if (text[i] === ",") i = space(text, i + 1)
      else if (text[i] !== "}") return { error: "an object is not closed by }" }
      if (text[i] === "}") return { value: Object.fromEntries(out), end: i + 1 }
    }
  }
  return { error: "a value is not in Gemma's notation" }
}
