/**
 * A tiny GGUF model written by hand, so tests and benchmarks need no downloaded weights (its
 * answers are random, within the grammar): llama architecture,
 * 2 layers, 64 dimensions, random f32 weights from a fixed seed, and a byte-level vocabulary
 * (`<unk>`, `<s>`, `</s>`, then all 256 byte tokens, so any text can be tokenized).
 */
import { writeFileSync } from "node:fs"

const dims = 64
const layers = 2
const feedForward = 128
const heads = 4
const special = ["<unk>", "<s>", "</s>"] as const
const byteToken = (byte: number) => `<0x${byte.toString(16).toUpperCase().padStart(2, "0")}>`

/**
 * How to write the model: its seed, its trained context (`llama.context_length`, default 4096),
 * a chat template, and byte tokens left out (a broken vocabulary).
 */
export interface Options {
  readonly seed?: number
  readonly context?: number
  readonly chatTemplate?: string
  readonly withoutBytes?: ReadonlyArray<number>
}

/** GGUF value types. */
const type = { uint32: 4, int32: 5, float32: 6, string: 8, array: 9 } as const

type Value =
  | { readonly uint32: number }
  | { readonly float32: number }
  | { readonly string: string }
  | { readonly strings: ReadonlyArray<string> }
  | { readonly floats: ReadonlyArray<number> }
  | { readonly int32s: ReadonlyArray<number> }

class Writer {
  private readonly chunks: Array<Buffer> = []
  size = 0
  private push(buffer: Buffer) {
    this.chunks.push(buffer)
    this.size += buffer.length
  }
  u32(n: number) {
    const b = Buffer.alloc(4)
    b.writeUInt32LE(n)
    this.push(b)
  }
  i32(n: number) {
    const b = Buffer.alloc(4)
    b.writeInt32LE(n)
    this.push(b)
  }
  u64(n: number) {
    const b = Buffer.alloc(8)
    b.writeBigUInt64LE(BigInt(n))
    this.push(b)
  }
  f32(n: number) {
    const b = Buffer.alloc(4)
    b.writeFloatLE(n)
    this.push(b)
  }
  str(s: string) {
    const bytes = Buffer.from(s, "utf8")
    this.u64(bytes.length)
    this.push(bytes)
  }
  bytes(buffer: Buffer) {
    this.push(buffer)
  }
  pad(alignment: number) {
    const rest = this.size % alignment
    if (rest !== 0) this.push(Buffer.alloc(alignment - rest))
  }
  value(v: Value) {
    if ("uint32" in v) return (this.u32(type.uint32), this.u32(v.uint32))
    if ("float32" in v) return (this.u32(type.float32), this.f32(v.float32))
    if ("string" in v) return (this.u32(type.string), this.str(v.string))
    this.u32(type.array)
    if ("strings" in v) return (this.u32(type.string), this.u64(v.strings.length), v.strings.forEach((s) => this.str(s)))
    if ("floats" in v) return (this.u32(type.float32), this.u64(v.floats.length), v.floats.forEach((f) => this.f32(f)))
    return (this.u32(type.int32), this.u64(v.int32s.length), v.int32s.forEach((i) => this.i32(i)))
  }
  buffer() {
    return Buffer.concat(this.chunks)
  }
}

/** mulberry32: a small seeded generator, so the weights are the same on every run. */
const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

/** The model's bytes; `chatTemplate` adds `tokenizer.chat_template`. */
export const tinyGguf = (options: Options = {}): Buffer => {
  const next = random(options.seed ?? 42)
  const bytes = Array.from({ length: 256 }, (_, byte) => byte).filter((byte) => !(options.withoutBytes ?? []).includes(byte))
  const vocabulary = [...special, ...bytes.map(byteToken)]
  // Tensors as GGML sees them: dimensions innermost first.
  const tensors: Array<{ readonly name: string; readonly shape: ReadonlyArray<number>; readonly norm?: true }> = [
    { name: "token_embd.weight", shape: [dims, vocabulary.length] },
    { name: "output_norm.weight", shape: [dims], norm: true },
    { name: "output.weight", shape: [dims, vocabulary.length] }
  ]
  for (let i = 0; i < layers; i++) {
    tensors.push(
      { name: `blk.${i}.attn_norm.weight`, shape: [dims], norm: true },
      { name: `blk.${i}.attn_q.weight`, shape: [dims, dims] },
      { name: `blk.${i}.attn_k.weight`, shape: [dims, dims] },
      { name: `blk.${i}.attn_v.weight`, shape: [dims, dims] },
      { name: `blk.${i}.attn_output.weight`, shape: [dims, dims] },
      { name: `blk.${i}.ffn_norm.weight`, shape: [dims], norm: true },
      { name: `blk.${i}.ffn_gate.weight`, shape: [dims, feedForward] },
      { name: `blk.${i}.ffn_up.weight`, shape: [dims, feedForward] },
      { name: `blk.${i}.ffn_down.weight`, shape: [feedForward, dims] }
    )
  }
  const metadata: ReadonlyArray<readonly [string, Value]> = [
    ["general.architecture", { string: "llama" }],
    ["general.name", { string: "rx-tiny-test" }],
    ["general.alignment", { uint32: 32 }],
    ["llama.context_length", { uint32: options.context ?? 4096 }],
    ["llama.embedding_length", { uint32: dims }],
    ["llama.block_count", { uint32: layers }],
    ["llama.feed_forward_length", { uint32: feedForward }],
    ["llama.attention.head_count", { uint32: heads }],
    ["llama.attention.head_count_kv", { uint32: heads }],
    ["llama.rope.dimension_count", { uint32: dims / heads }],
    ["llama.attention.layer_norm_rms_epsilon", { float32: 1e-5 }],
    ["tokenizer.ggml.model", { string: "llama" }],
    ["tokenizer.ggml.tokens", { strings: vocabulary }],
    ["tokenizer.ggml.scores", { floats: vocabulary.map(() => 0) }],
    // 2: unknown, 3: control, 6: byte.
    ["tokenizer.ggml.token_type", { int32s: vocabulary.map((_, i) => (i === 0 ? 2 : i < special.length ? 3 : 6)) }],
    ["tokenizer.ggml.unknown_token_id", { uint32: 0 }],
    ["tokenizer.ggml.bos_token_id", { uint32: 1 }],
    ["tokenizer.ggml.eos_token_id", { uint32: 2 }],
    ...(options.chatTemplate === undefined ? [] : [["tokenizer.chat_template", { string: options.chatTemplate }] as const])
  ]
  const out = new Writer()
  out.bytes(Buffer.from("GGUF"))
  out.u32(3)
  out.u64(tensors.length)
  out.u64(metadata.length)
  for (const [key, value] of metadata) {
    out.str(key)
    out.value(value)
  }
  let offset = 0
  const data: Array<Buffer> = []
  for (const tensor of tensors) {
    const count = tensor.shape.reduce((a, b) => a * b, 1)
    const values = Buffer.alloc(count * 4)
    for (let i = 0; i < count; i++) values.writeFloatLE(tensor.norm === true ? 1 : (next() - 0.5) * 0.2, i * 4)
    out.str(tensor.name)
    out.u32(tensor.shape.length)
    for (const d of tensor.shape) out.u64(d)
    out.u32(0) // f32
    out.u64(offset)
    data.push(values)
    offset += values.length + ((32 - (values.length % 32)) % 32)
  }
  out.pad(32)
  for (const values of data) {
    out.bytes(values)
    out.pad(32)
  }
  return out.buffer()
}

/** Write the tiny model to `file`; its size in bytes. */
export const writeTinyGguf = (file: string, options: Options = {}): number => {
  const bytes = tinyGguf(options)
  writeFileSync(file, bytes)
  return bytes.length
}
