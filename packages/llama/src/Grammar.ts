/**
 * The grammar every answer is generated under: one JSON action among the offered tools,
 * `{"thought": "...", "tool": "<name>", "input": {...}}` with the thought optional, written as
 * GBNF (llama.cpp's grammar format) from the tools' JSON Schemas. Sampling can only follow it, so
 * a model, however small, cannot answer malformed JSON, an unknown tool or a missing key.
 *
 * Enforced: types, required and optional keys (no others), enums and consts, string lengths up
 * to 256, array lengths up to 64, integers of at most 15 digits (safe in JavaScript), integer
 * ranges of at most 64 values, lower bounds 0 and 1 on integers, `$ref`s into `$defs`. Not enforced (rx decodes the action with the tool's Schema and
 * tells the model what it refused): patterns, formats, other numeric bounds, `allOf`. Numbers
 * may come in exponent form, as JSON allows, with at most two exponent digits (so always finite).
 */
import type { Tool } from "@rx/kernel"

/** Rules every grammar has: JSON's strings, numbers and values, and the optional space. */
const base: ReadonlyArray<readonly [string, string]> = [
  ["sp", `" "?`],
  // Any character but `"`, `\` and controls, as a Unicode scalar value: no surrogates, nothing past U+10FFFF.
  ["char", `[\\x20\\x21\\x23-\\x5B\\x5D-\\x7E\\x80-\\uD7FF\\uE000-\\U0010FFFF] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F]{4})`],
  ["string", `"\\"" char* "\\""`],
  ["integer", `"-"? ("0" | [1-9] [0-9]{0,14})`],
  ["number", `"-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?`],
  ["boolean", `"true" | "false"`],
  ["null", `"null"`],
  ["value", `object | array | string | number | boolean | null`],
  ["object", `"{" (string ":" sp value ("," sp string ":" sp value)*)? "}"`],
  ["array", `"[" (value ("," sp value)*)? "]"`]
]

/** A GBNF string literal matching exactly `text`. */
export const literal = (text: string): string =>
  `"${
    [...text].map((c) => {
      const code = c.codePointAt(0) ?? 0
      if (c === "\"" || c === "\\") return `\\${c}`
      if (code < 0x20 || code === 0x7f) return `\\x${code.toString(16).padStart(2, "0")}`
      return c
    }).join("")
  }"`

/** The JSON text of `value`, as a GBNF literal. */
const json = (value: unknown): string => literal(JSON.stringify(value) ?? "null")

type Schema = Readonly<Record<string, unknown>>

const isSchema = (value: unknown): value is Schema => typeof value === "object" && value !== null && !Array.isArray(value)
const isNumber = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value)
const schemas = (value: unknown): ReadonlyArray<unknown> => (Array.isArray(value) ? value : [])

/** Keywords that say nothing about what a value may be. */
const annotations = new Set(["description", "title", "examples", "default", "$comment", "$schema", "$defs", "definitions", "$id"])

/** The definition `#/$defs/Name` (or `#/definitions/Name`) names in `root`. */
const resolve = (ref: string, root: unknown): unknown => {
  const match = /^#\/(\$defs|definitions)\/(.+)$/.exec(ref)
  const key = match?.[2]
  const defs = match === null || !isSchema(root) ? undefined : root[match[1] ?? ""]
  return key === undefined || !isSchema(defs) ? undefined : defs[key.replace(/~1/g, "/").replace(/~0/g, "~")]
}

/** Repetition bounds GBNF can take without expanding into too many rules. */
const maxStringBound = 256
const maxArrayBound = 64
const maxIntegerChoices = 64

/** Builds the rules of one grammar; identical bodies share one rule. */
class Rules {
  private readonly bodies = new Map<string, string>()
  private readonly names = new Map<string, string>()
  /** The rule of each `$ref`, by the schema it resolves against. */
  private readonly refs = new Map<unknown, Map<string, string>>()

  /** A rule with `body` (an existing one if the body is the same); its name. */
  add(hint: string, body: string): string {
    const existing = this.names.get(body)
    if (existing !== undefined) return existing
    const stem = hint.replace(/[^a-zA-Z0-9]+/g, "-").replace(/^-|-$/g, "").toLowerCase() || "r"
    let name = stem
    for (let i = 2; this.bodies.has(name) || base.some(([b]) => b === name) || name === "root"; i++) name = `${stem}-${i}`
    this.bodies.set(name, body)
    this.names.set(body, name)
    return name
  }

  /** A grammar expression for a JSON Schema; `root` is the schema `$ref`s resolve against. */
  compile(schema: unknown, root: unknown, hint: string): string {
    if (schema === true || schema === undefined || (isSchema(schema) && Object.keys(schema).length === 0)) return "value"
    if (!isSchema(schema)) return "value"
    if ("const" in schema) return json(schema["const"])
    if (Array.isArray(schema["enum"])) return this.choice(hint, schema["enum"].map(json))
    const alternatives = schemas(schema["anyOf"]).length > 0 ? schemas(schema["anyOf"]) : schemas(schema["oneOf"])
    if (alternatives.length > 0) return this.choice(hint, alternatives.map((s, i) => this.compile(s, root, `${hint}-${i}`)))
    const allOf = schemas(schema["allOf"])
    if (allOf.length === 1) return this.compile(allOf[0], root, hint)
    if (typeof schema["$ref"] === "string") {
      // A `$ref` with constraints beside it (`{"$ref": "#/$defs/Int", "minimum": 1}`): the target with them.
      const { $ref, ...rest } = schema
      if (!Object.keys(rest).some((key) => !annotations.has(key))) return this.ref($ref, root)
      const target = resolve($ref, root)
      return this.compile(isSchema(target) ? { ...target, ...rest } : rest, root, hint)
    }
    const type = schema["type"]
    if (Array.isArray(type)) return this.choice(hint, type.map((t) => this.compile({ ...schema, type: t }, root, `${hint}-${String(t)}`)))
    switch (type) {
      case "string":
        return this.string(schema, hint)
      case "integer":
        return this.integer(schema, hint)
      case "number":
        return isNumber(schema["minimum"]) && schema["minimum"] >= 0 ? this.add(`${hint}-nonneg`, `("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?`) : "number"
      case "boolean":
        return "boolean"
      case "null":
        return "null"
      case "array":
        return this.array(schema, root, hint)
      case "object":
        return this.object(schema, root, hint)
      default:
        return isSchema(schema["properties"]) ? this.object(schema, root, hint) : "value"
    }
  }

  private choice(hint: string, alternatives: ReadonlyArray<string>): string {
    const unique = [...new Set(alternatives)]
    return unique.length === 1 ? (unique[0] ?? "value") : this.add(hint, unique.join(" | "))
  }

  /** `#/$defs/Name` (or `#/definitions/Name`) as a rule of its own, so recursive types work. */
  private ref(ref: string, root: unknown): string {
    const known = this.refs.get(root) ?? new Map<string, string>()
    this.refs.set(root, known)
    const seen = known.get(ref)
    if (seen !== undefined) return seen
    const target = resolve(ref, root)
    if (target === undefined) return "value"
    // Named before it is compiled: a definition may refer to itself.
    const name = this.add(`def-${ref.split("/").at(-1) ?? ""}`, `(pending ${ref} ${known.size} ${this.refs.size})`)
    known.set(ref, name)
    const pending = this.bodies.get(name) ?? ""
    this.names.delete(pending)
    this.bodies.set(name, this.compile(target, root, `${name}-body`))
    return name
  }

  private string(schema: Schema, hint: string): string {
    const min = isNumber(schema["minLength"]) ? Math.max(0, Math.floor(schema["minLength"])) : 0
    const max = isNumber(schema["maxLength"]) ? Math.floor(schema["maxLength"]) : undefined
    if (max !== undefined && max <= maxStringBound && max >= min) return this.add(`${hint}-str`, `"\\"" char{${min},${max}} "\\""`)
    if (min > 0 && min <= maxStringBound) return this.add(`${hint}-str`, `"\\"" char{${min},} "\\""`)
    return "string"
  }

  private integer(schema: Schema, hint: string): string {
    const lower = isNumber(schema["exclusiveMinimum"])
      ? Math.floor(schema["exclusiveMinimum"]) + 1
      : isNumber(schema["minimum"])
      ? Math.ceil(schema["minimum"])
      : undefined
    const upper = isNumber(schema["exclusiveMaximum"])
      ? Math.ceil(schema["exclusiveMaximum"]) - 1
      : isNumber(schema["maximum"])
      ? Math.floor(schema["maximum"])
      : undefined
    if (lower !== undefined && upper !== undefined && upper >= lower && upper - lower < maxIntegerChoices) {
      return this.choice(`${hint}-int`, Array.from({ length: upper - lower + 1 }, (_, i) => json(lower + i)))
    }
    if (lower !== undefined && lower >= 1) return this.add("positive", `[1-9] [0-9]{0,14}`)
    if (lower === 0) return this.add("nonnegative", `"0" | [1-9] [0-9]{0,14}`)
    return "integer"
  }

  private array(schema: Schema, root: unknown, hint: string): string {
    const prefix = Array.isArray(schema["prefixItems"]) ? schema["prefixItems"] : Array.isArray(schema["items"]) ? schema["items"] : undefined
    if (prefix !== undefined) {
      // A tuple: its items in order, then nothing more.
      const items = prefix.map((s, i) => this.compile(s, root, `${hint}-${i}`))
      return this.add(`${hint}-tuple`, items.length === 0 ? `"[" "]"` : `"[" ${items.join(` "," sp `)} "]"`)
    }
    const item = this.compile(schema["items"], root, `${hint}-item`)
    const min = isNumber(schema["minItems"]) ? Math.max(0, Math.floor(schema["minItems"])) : 0
    const max = isNumber(schema["maxItems"]) ? Math.floor(schema["maxItems"]) : undefined
    if (max === 0) return this.add("empty-array", `"[" "]"`)
    const rest = max !== undefined && max <= maxArrayBound && max >= min
      ? `{${Math.max(0, min - 1)},${max - 1}}`
      : min > 1 && min <= maxArrayBound
      ? `{${min - 1},}`
      : "*"
    const items = `${item} ("," sp ${item})${rest}`
    return this.add(`${hint}-array`, min >= 1 ? `"[" ${items} "]"` : `"[" (${items})? "]"`)
  }

  private object(schema: Schema, root: unknown, hint: string): string {
    const properties = isSchema(schema["properties"]) ? Object.entries(schema["properties"]) : []
    if (properties.length === 0) {
      const extra = schema["additionalProperties"]
      if (extra === false) return this.add("empty-object", `"{" "}"`)
      if (!isSchema(extra) || Object.keys(extra).length === 0) return "object"
      // A record: any keys, each value of one schema.
      const value = this.compile(extra, root, `${hint}-value`)
      return this.add(`${hint}-record`, `"{" (string ":" sp ${value} ("," sp string ":" sp ${value})*)? "}"`)
    }
    const required = new Set(schemas(schema["required"]).filter((k): k is string => typeof k === "string"))
    const pair = (key: string, value: unknown) =>
      this.add(`${hint}-${key}-kv`, `${literal(`${JSON.stringify(key)}:`)} sp ${this.compile(value, root, `${hint}-${key}`)}`)
    const must = properties.filter(([key]) => required.has(key)).map(([key, value]) => pair(key, value))
    const may = properties.filter(([key]) => !required.has(key)).map(([key, value]) => pair(key, value))
    // The optional keys in their order, each present or not. `choice[i]`: some of keys i.. with
    // the first of them; `more[i]`: optionally a comma and some of keys i...
    const choice: Array<string> = []
    const more: Array<string> = []
    for (let i = may.length - 1; i >= 0; i--) {
      const next = i + 1 < may.length ? ` ${more[i + 1]} | ${choice[i + 1]}` : ""
      choice[i] = this.add(`${hint}-opt-${i}`, `${may[i]}${next}`)
      more[i] = this.add(`${hint}-more-${i}`, `("," sp ${choice[i]})?`)
    }
    const body = must.length === 0
      ? may.length === 0 ? `"{" "}"` : `"{" ${choice[0]}? "}"`
      : `"{" ${must.join(` "," sp `)}${may.length === 0 ? "" : ` ${more[0]}`} "}"`
    return this.add(`${hint}-object`, body)
  }

  /** The grammar's text: `root` first, then the rules, then the base rules it uses. */
  text(root: string): string {
    const lines = [`root ::= ${root}`, ...[...this.bodies].map(([name, body]) => `${name} ::= ${body}`), ...base.map(([name, body]) => `${name} ::= ${body}`)]
    return `${lines.join("\n")}\n`
  }
}

/**
 * The GBNF of one action among `tools`: `{"thought": <string>, "tool": <name>, "input": <its
 * input>}`, the thought optional, one space allowed after each `:` and `,`.
 */
export const action = (tools: ReadonlyArray<Tool.Spec>): string => {
  const rules = new Rules()
  const branches = tools.map((tool, i) => {
    const input = rules.compile(tool.parameters, tool.parameters, `t${i}-${tool.name}`)
    return rules.add(`t${i}-${tool.name}-action`, `${literal(`"tool":`)} sp ${literal(JSON.stringify(tool.name))} "," sp ${literal(`"input":`)} sp ${input}`)
  })
  const thought = rules.add("thought", `${literal(`"thought":`)} sp string "," sp`)
  const choice = branches.length === 0 ? `${literal(`"tool":`)} sp string "," sp ${literal(`"input":`)} sp object` : branches.join(" | ")
  return rules.text(`"{" ${thought}? (${choice}) "}"`)
}
