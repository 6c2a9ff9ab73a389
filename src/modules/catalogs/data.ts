import { groupsOfMcc, mccEntries, mccGroups } from "../../domain/mcc.ts";

/**
 * The catalogs of the origin API (domain-mx §1, §5, §7). Request fields typed "catalog value"
 * are validated against the `key`s here; GET /v1/catalogs/<name> lists them.
 */
export interface CatalogItem {
  key: string;
  value: string;
}

export interface StateItem extends CatalogItem {
  /** Two-letter code used inside CURPs. */
  curp_code: string;
  /** INEGI state number. */
  inegi_code: string;
}

/** The 32 federal entities. Keys are upper case without accents, as in the origin's examples (CDMX, SAN LUIS POTOSI). */
export const states: StateItem[] = [
  { key: "AGUASCALIENTES", value: "Aguascalientes", curp_code: "AS", inegi_code: "01" },
  { key: "BAJA CALIFORNIA", value: "Baja California", curp_code: "BC", inegi_code: "02" },
  { key: "BAJA CALIFORNIA SUR", value: "Baja California Sur", curp_code: "BS", inegi_code: "03" },
  { key: "CAMPECHE", value: "Campeche", curp_code: "CC", inegi_code: "04" },
  { key: "COAHUILA", value: "Coahuila de Zaragoza", curp_code: "CL", inegi_code: "05" },
  { key: "COLIMA", value: "Colima", curp_code: "CM", inegi_code: "06" },
  { key: "CHIAPAS", value: "Chiapas", curp_code: "CS", inegi_code: "07" },
  { key: "CHIHUAHUA", value: "Chihuahua", curp_code: "CH", inegi_code: "08" },
  { key: "CDMX", value: "Ciudad de México", curp_code: "DF", inegi_code: "09" },
  { key: "DURANGO", value: "Durango", curp_code: "DG", inegi_code: "10" },
  { key: "GUANAJUATO", value: "Guanajuato", curp_code: "GT", inegi_code: "11" },
  { key: "GUERRERO", value: "Guerrero", curp_code: "GR", inegi_code: "12" },
  { key: "HIDALGO", value: "Hidalgo", curp_code: "HG", inegi_code: "13" },
  { key: "JALISCO", value: "Jalisco", curp_code: "JC", inegi_code: "14" },
  { key: "ESTADO DE MEXICO", value: "México", curp_code: "MC", inegi_code: "15" },
  { key: "MICHOACAN", value: "Michoacán de Ocampo", curp_code: "MN", inegi_code: "16" },
  { key: "MORELOS", value: "Morelos", curp_code: "MS", inegi_code: "17" },
  { key: "NAYARIT", value: "Nayarit", curp_code: "NT", inegi_code: "18" },
  { key: "NUEVO LEON", value: "Nuevo León", curp_code: "NL", inegi_code: "19" },
  { key: "OAXACA", value: "Oaxaca", curp_code: "OC", inegi_code: "20" },
  { key: "PUEBLA", value: "Puebla", curp_code: "PL", inegi_code: "21" },
  { key: "QUERETARO", value: "Querétaro", curp_code: "QT", inegi_code: "22" },
  { key: "QUINTANA ROO", value: "Quintana Roo", curp_code: "QR", inegi_code: "23" },
  { key: "SAN LUIS POTOSI", value: "San Luis Potosí", curp_code: "SP", inegi_code: "24" },
  { key: "SINALOA", value: "Sinaloa", curp_code: "SL", inegi_code: "25" },
  { key: "SONORA", value: "Sonora", curp_code: "SR", inegi_code: "26" },
  { key: "TABASCO", value: "Tabasco", curp_code: "TC", inegi_code: "27" },
  { key: "TAMAULIPAS", value: "Tamaulipas", curp_code: "TS", inegi_code: "28" },
  { key: "TLAXCALA", value: "Tlaxcala", curp_code: "TL", inegi_code: "29" },
  { key: "VERACRUZ", value: "Veracruz de Ignacio de la Llave", curp_code: "VZ", inegi_code: "30" },
  { key: "YUCATAN", value: "Yucatán", curp_code: "YN", inegi_code: "31" },
  { key: "ZACATECAS", value: "Zacatecas", curp_code: "ZS", inegi_code: "32" },
];

/** State codes that may appear inside a CURP: the 32 entities and NE (born abroad). */
export const curpStateCodes: ReadonlySet<string> = new Set([...states.map((s) => s.curp_code), "NE"]);

export const genders: CatalogItem[] = [
  { key: "M", value: "Masculino" },
  { key: "F", value: "Femenino" },
  { key: "X", value: "No binario" },
];

export const maritalStatuses: CatalogItem[] = [
  { key: "SOLTERO", value: "Soltero(a)" },
  { key: "CASADO", value: "Casado(a)" },
  { key: "UNION_LIBRE", value: "Unión libre" },
  { key: "DIVORCIADO", value: "Divorciado(a)" },
  { key: "SEPARADO", value: "Separado(a)" },
  { key: "VIUDO", value: "Viudo(a)" },
];

export const documentTypes: CatalogItem[] = [
  { key: "INE", value: "Credencial para votar (INE)" },
  { key: "CURP", value: "Clave Única de Registro de Población" },
  { key: "PASAPORTE", value: "Pasaporte" },
  { key: "RFC", value: "Registro Federal de Contribuyentes" },
  { key: "CEDULA_PROFESIONAL", value: "Cédula profesional" },
  { key: "TARJETA_RESIDENTE", value: "Tarjeta de residente" },
];

/** Every status a card can have; the lifecycle is in the cards module. */
export const cardStatuses: CatalogItem[] = [
  { key: "NOT_ASSIGNED", value: "In stock, not assigned" },
  { key: "NEED_ACTIVATION", value: "Assigned, awaiting activation" },
  { key: "ACTIVE", value: "Active" },
  { key: "TEMPORARY_INACTIVE", value: "Temporarily blocked" },
  { key: "CANCELED", value: "Canceled (terminal)" },
];

export interface InstitutionItem extends CatalogItem {
  /** First three digits of the institution's CLABEs. */
  clabe_prefix: string;
}

/** SPEI participants, keyed by Banxico code (Banxico's list of March 2026). */
export const transferInstitutions: InstitutionItem[] = [
  { key: "2001", value: "Banxico", clabe_prefix: "001" },
  { key: "37006", value: "Bancomext", clabe_prefix: "006" },
  { key: "37009", value: "Banobras", clabe_prefix: "009" },
  { key: "37019", value: "Banjercito", clabe_prefix: "019" },
  { key: "37135", value: "Nafin", clabe_prefix: "135" },
  { key: "37166", value: "BaBien", clabe_prefix: "166" },
  { key: "37168", value: "Hipotecaria Fed", clabe_prefix: "168" },
  { key: "40002", value: "Banamex", clabe_prefix: "002" },
  { key: "40012", value: "BBVA Mexico", clabe_prefix: "012" },
  { key: "40014", value: "Santander", clabe_prefix: "014" },
  { key: "40021", value: "HSBC", clabe_prefix: "021" },
  { key: "40030", value: "Bajio", clabe_prefix: "030" },
  { key: "40036", value: "Inbursa", clabe_prefix: "036" },
  { key: "40042", value: "Mifel", clabe_prefix: "042" },
  { key: "40044", value: "Scotiabank", clabe_prefix: "044" },
  { key: "40058", value: "Banregio", clabe_prefix: "058" },
  { key: "40059", value: "Invex", clabe_prefix: "059" },
  { key: "40060", value: "Bansi", clabe_prefix: "060" },
  { key: "40062", value: "Afirme", clabe_prefix: "062" },
  { key: "40072", value: "Banorte", clabe_prefix: "072" },
  { key: "40106", value: "Bank Of America", clabe_prefix: "106" },
  { key: "40108", value: "Mufg", clabe_prefix: "108" },
  { key: "40110", value: "JP Morgan", clabe_prefix: "110" },
  { key: "40112", value: "Bmonex", clabe_prefix: "112" },
  { key: "40113", value: "Ve Por Mas", clabe_prefix: "113" },
  { key: "40124", value: "Citi Mexico", clabe_prefix: "124" },
  { key: "40127", value: "Azteca", clabe_prefix: "127" },
  { key: "40128", value: "Autofin", clabe_prefix: "128" },
  { key: "40129", value: "Barclays", clabe_prefix: "129" },
  { key: "40130", value: "Compartamos", clabe_prefix: "130" },
  { key: "40132", value: "Multiva Banco", clabe_prefix: "132" },
  { key: "40133", value: "Actinver", clabe_prefix: "133" },
  { key: "40136", value: "Intercam Banco", clabe_prefix: "136" },
  { key: "40137", value: "Bancoppel", clabe_prefix: "137" },
  { key: "40138", value: "Uala", clabe_prefix: "138" },
  { key: "40140", value: "Consubanco", clabe_prefix: "140" },
  { key: "40141", value: "Volkswagen", clabe_prefix: "141" },
  { key: "40143", value: "CIBanco", clabe_prefix: "143" },
  { key: "40145", value: "BBase", clabe_prefix: "145" },
  { key: "40147", value: "Bankaool", clabe_prefix: "147" },
  { key: "40148", value: "Pagatodo", clabe_prefix: "148" },
  { key: "40150", value: "Inmobiliario", clabe_prefix: "150" },
  { key: "40151", value: "Donde", clabe_prefix: "151" },
  { key: "40152", value: "Bancrea", clabe_prefix: "152" },
  { key: "40154", value: "Banco Covalto", clabe_prefix: "154" },
  { key: "40155", value: "Icbc", clabe_prefix: "155" },
  { key: "40156", value: "Sabadell", clabe_prefix: "156" },
  { key: "40157", value: "Shinhan", clabe_prefix: "157" },
  { key: "40158", value: "Mizuho Bank", clabe_prefix: "158" },
  { key: "40159", value: "Bank Of China", clabe_prefix: "159" },
  { key: "40160", value: "Banco S3", clabe_prefix: "160" },
  { key: "40167", value: "Hey Banco", clabe_prefix: "167" },
  { key: "90600", value: "Monexcb", clabe_prefix: "600" },
  { key: "90601", value: "Gbm", clabe_prefix: "601" },
  { key: "90602", value: "Masari", clabe_prefix: "602" },
  { key: "90605", value: "Value", clabe_prefix: "605" },
  { key: "90616", value: "Finamex", clabe_prefix: "616" },
  { key: "90617", value: "Valmex", clabe_prefix: "617" },
  { key: "90620", value: "Profuturo", clabe_prefix: "620" },
  { key: "90630", value: "CB Intercam", clabe_prefix: "630" },
  { key: "90631", value: "CI Bolsa", clabe_prefix: "631" },
  { key: "90634", value: "Fincomun", clabe_prefix: "634" },
  { key: "90638", value: "NU MEXICO", clabe_prefix: "638" },
  { key: "90646", value: "STP", clabe_prefix: "646" },
  { key: "90652", value: "Credicapital", clabe_prefix: "652" },
  { key: "90653", value: "Kuspit", clabe_prefix: "653" },
  { key: "90656", value: "Unagra", clabe_prefix: "656" },
  { key: "90659", value: "Asp Integra Opc", clabe_prefix: "659" },
  { key: "90661", value: "KLAR", clabe_prefix: "661" },
  { key: "90670", value: "Libertad", clabe_prefix: "670" },
  { key: "90677", value: "Caja Pop Mexica", clabe_prefix: "677" },
  { key: "90680", value: "Cristobal Colon", clabe_prefix: "680" },
  { key: "90683", value: "Caja Telefonist", clabe_prefix: "683" },
  { key: "90684", value: "Transfer", clabe_prefix: "684" },
  { key: "90685", value: "Fondo (Fira)", clabe_prefix: "685" },
  { key: "90688", value: "Crediclub", clabe_prefix: "688" },
  { key: "90689", value: "Fomped", clabe_prefix: "689" },
  { key: "90699", value: "Fondeadora", clabe_prefix: "699" },
  { key: "90703", value: "Tesored", clabe_prefix: "703" },
  { key: "90706", value: "Arcus Fi", clabe_prefix: "706" },
  { key: "90710", value: "NVIO", clabe_prefix: "710" },
  { key: "90714", value: "PPBALANCEMX", clabe_prefix: "714" },
  { key: "90715", value: "Cashi Cuenta", clabe_prefix: "715" },
  { key: "90720", value: "MexPago", clabe_prefix: "720" },
  { key: "90721", value: "Albo", clabe_prefix: "721" },
  { key: "90722", value: "Mercado Pago W", clabe_prefix: "722" },
  { key: "90723", value: "Cuenca", clabe_prefix: "723" },
  { key: "90725", value: "COOPDESARROLLO", clabe_prefix: "725" },
  { key: "90727", value: "Transfer directo", clabe_prefix: "727" },
  { key: "90728", value: "Spin by OXXO", clabe_prefix: "728" },
  { key: "90729", value: "Dep y Pag Dig", clabe_prefix: "729" },
  { key: "90730", value: "Swap", clabe_prefix: "730" },
  { key: "90732", value: "Peibo", clabe_prefix: "732" },
  { key: "90734", value: "Finco Pay", clabe_prefix: "734" },
  { key: "90738", value: "Fintoc", clabe_prefix: "738" },
  { key: "90901", value: "Cls", clabe_prefix: "901" },
  { key: "90902", value: "Indeval", clabe_prefix: "902" },
  { key: "90903", value: "CoDi Valida", clabe_prefix: "903" },
];

export const catalogs = {
  state: states,
  gender: genders,
  marital_status: maritalStatuses,
  document_type: documentTypes,
  card_status: cardStatuses,
  transfer_institutions: transferInstitutions,
} as const;

export type CatalogName = keyof typeof catalogs;

const keySets = Object.fromEntries(
  Object.entries(catalogs).map(([name, items]) => [name, new Set(items.map((item) => item.key))]),
) as unknown as Record<CatalogName, ReadonlySet<string>>;

export function isCatalogKey(catalog: CatalogName, key: string): boolean {
  return keySets[catalog].has(key);
}

export function catalogKeys(catalog: CatalogName): string[] {
  return catalogs[catalog].map((item) => item.key);
}

export function institutionByCode(code: string): InstitutionItem | undefined {
  return transferInstitutions.find((item) => item.key === code);
}

/** A merchant category code of GET /v1/catalogs/mcc: a code, or a range of brand-specific codes. */
export interface MccItem extends CatalogItem {
  /** The first and last code the entry covers: the code itself, or the range's ends. */
  first: string;
  last: string;
  /** The keys of the MCC groups the entry's codes are in. */
  groups: readonly string[];
}

/** The ISO 18245 catalog (src/domain/mcc.ts): a range's key is "first-last" (3000-3299). */
export const mccItems: readonly MccItem[] = mccEntries.map((entry) => ({
  key: entry.first === entry.last ? entry.first : `${entry.first}-${entry.last}`,
  value: entry.description,
  first: entry.first,
  last: entry.last,
  groups: groupsOfMcc(entry.first),
}));

export interface MccGroupItem extends CatalogItem {
  codes: readonly string[];
  ranges: readonly { first: string; last: string }[];
}

/** The named groups of GET /v1/catalogs/mcc_groups, by key, with their codes and ranges. */
export const mccGroupItems: readonly MccGroupItem[] = mccGroups.map((group) => ({
  key: group.key,
  value: group.description,
  codes: group.codes,
  ranges: group.ranges,
}));
