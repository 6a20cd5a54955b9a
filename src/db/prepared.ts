import type { Db } from './knex';
import { giveBack, takeConnection } from './pool';
import { rowBuilder, type Parser, type RowBuilder } from './rows';

/*
 * What this file uses of `pg` (pinned by package-lock.json): a query object with `submit`
 * (pg's documented "submittable", as pg-cursor is), the connection's protocol messages
 * (parse, bind, describe, execute, sync) and its record of the statements it has prepared,
 * which pg's own queries read too.
 */
interface Field {
  name: string;
  dataTypeID: number;
}
interface ProtocolConnection {
  stream: { cork?(): void; uncork?(): void };
  parsedStatements: Record<string, string>;
  submittedNamedStatements: Record<string, string>;
  parse(msg: { text: string; name: string; types: unknown[] }): void;
  bind(msg: { portal: string; statement: string; values: unknown[]; binary: boolean; valueMapper: (v: unknown) => unknown }): void;
  describe(msg: { type: 'P'; name: string }): void;
  execute(msg: { portal: string; rows: number }): void;
  sync(): void;
}
interface PgClient {
  query(submittable: PreparedRead): void;
  query(text: string): Promise<unknown>;
  getTypeParser(oid: number, format: 'text'): (v: string) => unknown;
  escapeIdentifier(name: string): string;
  connection: Pick<ProtocolConnection, 'parsedStatements'>;
}

// eslint-disable-next-line @typescript-eslint/no-require-imports
const prepareValue = (require('pg/lib/utils') as { prepareValue: (v: unknown) => unknown }).prepareValue;

/**
 * A parameter as pg's prepareValue writes it, but a non-empty array of strings as one join: the
 * same literal (every element quoted, `\\` and `"` escaped), without pg's string built up one
 * element at a time. The translation batch sends three arrays of 100 strings, and pg's
 * `arrayString` was 16% of what that request allocated (issue 14).
 */
export function parameterValue(value: unknown): unknown {
  if (!Array.isArray(value) || value.length === 0) return prepareValue(value);
  let escape = false;
  for (const item of value) {
    if (typeof item !== 'string') return prepareValue(value);
    if (!escape && (item.includes('"') || item.includes('\\'))) escape = true;
  }
  const items = escape ? (value as string[]).map((item) => item.replace(/["\\]/g, '\\$&')) : (value as string[]);
  return `{"${items.join('","')}"}`;
}

/** A prepared statement's result columns on one connection: their names, the parser of each, and its rows' builder. */
interface Shape {
  text: string;
  names: string[];
  parsers: Parser[];
  build: RowBuilder;
}

/** The shapes learnt on each connection, by statement name (a connection that goes away takes its own). */
const shapes = new WeakMap<PgClient, Map<string, Shape>>();

/**
 * One execution of a named statement. The first on a connection sends Parse (as pg does for a
 * named query) and Describe, and keeps the row description the server answers with; every
 * later one sends only Bind, Execute and Sync, and the rows are read with the kept
 * description. pg's own query object asks for (Describe) and parses the row description again
 * on every execution, and clones its config and builds a Result each time: 7% of what a GET
 * one allocated, and its CPU (issue 14). A statement's result columns cannot change while it
 * stays prepared (PostgreSQL refuses to run it instead: "cached plan must not change result
 * type"), and any error forgets what was kept for it on that connection.
 */
class PreparedRead {
  readonly rows: Record<string, unknown>[] = [];
  /** Field descriptions of this execution, when it asked for them. */
  private described: Shape | null = null;
  private parseError: unknown = null;

  constructor(
    private readonly client: PgClient,
    readonly name: string,
    readonly text: string,
    private readonly values: unknown[],
    private shape: Shape | undefined,
    readonly callback: (err: unknown, rows?: Record<string, unknown>[]) => void,
  ) {}

  submit(connection: ProtocolConnection): Error | null {
    const previous = connection.parsedStatements[this.name] ?? connection.submittedNamedStatements[this.name];
    if (previous !== undefined && previous !== this.text) return new Error(`Prepared statements must be unique - '${this.name}' was used for a different statement`);
    if (this.shape && previous === undefined) this.shape = undefined;
    connection.stream.cork?.();
    try {
      if (previous === undefined) {
        connection.parse({ text: this.text, name: this.name, types: [] });
        connection.submittedNamedStatements[this.name] = this.text;
      }
      connection.bind({ portal: '', statement: this.name, values: this.values, binary: false, valueMapper: parameterValue });
      if (!this.shape) connection.describe({ type: 'P', name: '' });
      connection.execute({ portal: '', rows: 0 });
      connection.sync();
    } finally {
      connection.stream.uncork?.();
    }
    return null;
  }

  handleRowDescription(msg: { fields: Field[] }): void {
    const names = msg.fields.map((f) => f.name);
    this.described = {
      text: this.text,
      names,
      parsers: msg.fields.map((f) => this.client.getTypeParser(f.dataTypeID, 'text')),
      build: rowBuilder(names),
    };
    this.shape = this.described;
  }

  handleDataRow(msg: { fields: (string | null)[] }): void {
    const shape = this.shape;
    if (this.parseError) return;
    if (!shape || shape.names.length !== msg.fields.length) {
      this.parseError = new Error(`${this.name}: a row did not match the statement's kept description`);
      return;
    }
    // One object literal of every column (rowBuilder).
    this.rows.push(shape.build(msg.fields, shape.parsers));
  }

  handleCommandComplete(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}

  handleError(err: unknown): void {
    shapes.get(this.client)?.delete(this.name);
    this.callback(err);
  }

  handleReadyForQuery(): void {
    if (this.parseError) {
      this.handleError(this.parseError);
      return;
    }
    if (this.described) {
      let kept = shapes.get(this.client);
      if (!kept) shapes.set(this.client, (kept = new Map()));
      kept.set(this.name, this.described);
    }
    this.callback(null, this.rows);
  }
}

/**
 * One statement on a connection of Knex's pool, as a named (server-side prepared) statement:
 * PostgreSQL parses and plans it once per connection, and Knex's builder and runner (and its
 * per-query work) are skipped, as are pg's per-execution row description (PreparedRead) and
 * tarn's acquire machinery when a connection is idle (takeConnection). Knex's 'query' event
 * is still emitted (a cheap no-op without listeners), so what watches the statements a request
 * sends sees this one too. For the hottest statements only (reads, and the webhook relay's pass: one statement, its own transaction), outside transactions; `text` uses
 * PostgreSQL's $1 placeholders, and `name` is unique to that text.
 */
export async function preparedRows<T>(db: Db, name: string, text: string, values: unknown[]): Promise<T[]> {
  db.emit('query', { method: 'raw', sql: text, bindings: values, name });
  const client = await takeConnection<PgClient>(db);
  const run = () => {
    const kept = shapes.get(client)?.get(name);
    return new Promise<T[]>((resolve, reject) => {
      client.query(new PreparedRead(client, name, text, values, kept?.text === text ? kept : undefined, (err, rows) => (err ? reject(err) : resolve(rows as T[]))));
    });
  };
  try {
    try {
      return await run();
    } catch (err) {
      if (!resultTypeChanged(err)) throw err;
      // A migration added or dropped a column under the statement (`select t.*`): PostgreSQL
      // refuses it on this connection until it is prepared again. Once, so a rolling deploy's
      // old replicas keep answering.
      await client.query(`DEALLOCATE ${client.escapeIdentifier(name)}`);
      delete client.connection.parsedStatements[name];
      return await run();
    }
  } finally {
    await giveBack(db, client);
  }
}

/** PostgreSQL's refusal of a prepared statement whose result columns changed since it was prepared. */
export function resultTypeChanged(err: unknown): boolean {
  return (err as { code?: string }).code === '0A000' && /cached plan must not change result type/.test(String((err as Error).message));
}
