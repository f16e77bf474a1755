/** A body gathered as it streams, kept only while it fits in `limit` bytes. */
export class BoundedBody {
  private readonly chunks: Buffer[] = []
  private size = 0

  constructor(private readonly limit: number) {}

  add(chunk: Buffer): void {
    this.size += chunk.length
    if (this.size <= this.limit) this.chunks.push(chunk)
  }

  /** The whole body, or `undefined` once it went past the limit. */
  bytes(): Buffer | undefined {
    return this.size <= this.limit ? Buffer.concat(this.chunks, this.size) : undefined
  }
}
