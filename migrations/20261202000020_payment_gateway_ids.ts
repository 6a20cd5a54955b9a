import type { Knex } from 'knex';

/**
 * A gateway's payment id names one payment: the same `gateway_payment_id` twice for one gateway
 * (a webhook or a retry recorded twice) is refused. '' (no id yet) may repeat. A database that
 * already holds duplicates is named with them, to be resolved by hand, rather than migrated.
 */
export async function up(knex: Knex): Promise<void> {
  const dups = await knex.raw(`SELECT gateway, gateway_payment_id, array_agg(id ORDER BY id) AS ids
    FROM payments WHERE gateway_payment_id <> '' GROUP BY 1, 2 HAVING count(*) > 1 LIMIT 20`);
  if (dups.rows.length > 0) {
    const list = dups.rows.map((r: { gateway: string; gateway_payment_id: string; ids: number[] }) => `${r.gateway} ${r.gateway_payment_id}: payments ${r.ids.join(', ')}`).join('; ');
    throw new Error(`payments hold the same gateway_payment_id more than once for a gateway (${list}); give each a distinct id (or '') and migrate again.`);
  }
  await knex.raw(`CREATE UNIQUE INDEX payments_gateway_payment_id_unique ON payments (gateway, gateway_payment_id) WHERE gateway_payment_id <> ''`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX payments_gateway_payment_id_unique');
}
