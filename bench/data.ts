/**
 * The data and documents every bench target serves: the service (through its models) and the
 * references (through plain tables or memory). Deterministic, so every target answers the
 * same rows.
 */
export const READ_RECORDS = 10;
export const FILTERED_RECORDS = Number(process.env.BENCH_FILTERED_RECORDS || 10_000);
export const CATEGORIES = 20;

export interface ArticleRow {
  id: string;
  title: string;
  slug: string;
  summary: string;
  rating: number;
  featured: boolean;
}

export interface ListingRow {
  id: string;
  title: string;
  category: string;
  rank: number;
  summary: string;
  featured: boolean;
}

export function articleRow(i: number): ArticleRow {
  return {
    id: `a${String(i).padStart(5, '0')}`,
    title: `Article number ${i}`,
    slug: `article-${i}`,
    summary: `A short summary of article ${i}, long enough to look like real prose in a list view.`,
    rating: (i * 37) % 100,
    featured: i % 3 === 0,
  };
}

export function listingRow(i: number): ListingRow {
  return {
    id: `e${String(i).padStart(6, '0')}`,
    title: `Listing ${i}`,
    category: `c${i % CATEGORIES}`,
    rank: (i * 7919) % 100_000,
    summary: `Listing ${i} summary`,
    featured: i % 2 === 0,
  };
}

/** The five fields of the read model and the filtered model (CONTRACT §4 naming). */
export const ARTICLE_FIELDS = ['title', 'slug', 'summary', 'rating', 'featured'] as const;

/** The GraphQL documents; the service, ceiling-jit and yoga-node run these exact strings. */
export const READ_DOC = '{ articles(first: 10) { edges { node { _id title slug summary rating featured } } } }';
export const FILTER_CATEGORY = 'c7';
export const FILTERED_DOC = `{ listings(first: 20, where: { category: { eq: "${FILTER_CATEGORY}" } }, orderBy: [{ field: rank, direction: DESC }]) { edges { node { _id title category rank } } } }`;

/** The equivalent documents for PostGraphile's generated schema over bench_ref tables. */
export const PG_READ_DOC =
  '{ allArticles(first: 10, orderBy: PRIMARY_KEY_ASC) { edges { node { rowId title slug summary rating featured } } } }';
export const PG_FILTERED_DOC = `{ allListings(first: 20, condition: { category: "${FILTER_CATEGORY}" }, orderBy: RANK_DESC) { edges { node { rowId title category rank } } } }`;

/** The minimal schema, mirroring the service's naming, that ceiling-jit and yoga-node execute. */
export const REFERENCE_SDL = `
  enum SortDirection { ASC DESC }
  input StringFilter { eq: String }
  input ListingWhere { category: StringFilter }
  enum ListingSortField { rank }
  input ListingOrderBy { field: ListingSortField!, direction: SortDirection = ASC }
  type Article { _id: ID! title: String slug: String summary: String rating: Float featured: Boolean }
  type ArticleEdge { cursor: String! node: Article! }
  type ArticleConnection { edges: [ArticleEdge!]! }
  type Listing { _id: ID! title: String category: String rank: Float summary: String featured: Boolean }
  type ListingEdge { cursor: String! node: Listing! }
  type ListingConnection { edges: [ListingEdge!]! }
  type Query {
    articles(first: Int): ArticleConnection!
    listings(first: Int, where: ListingWhere, orderBy: [ListingOrderBy!]): ListingConnection!
  }
`;

/** SQL for the plain tables the peers (PostGraphile, yoga-node) read: schema bench_ref. */
/**
 * The PostGraphile write peer's table (issue 11): what a PostGraphile user would declare for
 * notes that are created, then published — typed columns, a unique slug, a publish timestamp.
 */
export const WRITE_PEER_DDL = `
  create schema if not exists bench_ref;
  drop table if exists bench_ref.note;
  create table bench_ref.note (id uuid primary key default gen_random_uuid(), slug text not null unique, title text not null,
    summary text not null, rating integer not null, featured boolean not null, published_at timestamptz,
    created_at timestamptz not null default now(), updated_at timestamptz not null default now());
`;

export const REFERENCE_DDL = `
  create schema if not exists bench_ref;
  drop table if exists bench_ref.article, bench_ref.listing;
  create table bench_ref.article (id text primary key, title text not null, slug text not null, summary text not null, rating integer not null, featured boolean not null);
  create table bench_ref.listing (id text primary key, title text not null, category text not null, rank integer not null, summary text not null, featured boolean not null);
  create index listing_category_rank on bench_ref.listing (category, rank);
  create index listing_rank on bench_ref.listing (rank);
`;
