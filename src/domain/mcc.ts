/**
 * ISO 18245 merchant category codes (MCCs), as the card networks assign them, and the named
 * groups spending controls use. Pure data and lookups: no I/O. The brand-specific codes of
 * airlines (3000-3299), car rental agencies (3351-3441) and lodging (3501-3999) are one entry per
 * range: each code names one brand (3001 an airline, 3501 a hotel chain), brands are added and
 * retired by the networks every year, and a spending control wants the kind of merchant, not the
 * brand. Every code of those ranges is known and takes the range's description.
 */

/** A catalog entry: one code (first = last) or a range of brand-specific codes. */
export interface MccEntry {
  first: string;
  last: string;
  description: string;
}

/** A named group: single codes and ranges, both inclusive. */
export interface MccGroup {
  key: string;
  description: string;
  codes: readonly string[];
  ranges: readonly { first: string; last: string }[];
}

const ranges: readonly MccEntry[] = [
  { first: "3000", last: "3299", description: "Airlines and air carriers (brand-specific codes)" },
  { first: "3351", last: "3441", description: "Car rental agencies (brand-specific codes)" },
  { first: "3501", last: "3999", description: "Lodging: hotels, motels and resorts (brand-specific codes)" },
];

const codes: readonly (readonly [string, string])[] = [
  ["0742", "Veterinary services"],
  ["0763", "Agricultural cooperatives"],
  ["0780", "Landscaping and horticultural services"],
  ["1520", "General contractors: residential and commercial"],
  ["1711", "Heating, plumbing and air-conditioning contractors"],
  ["1731", "Electrical contractors"],
  ["1740", "Masonry, stonework, tile setting, plastering and insulation contractors"],
  ["1750", "Carpentry contractors"],
  ["1761", "Roofing, siding and sheet metal work contractors"],
  ["1771", "Concrete work contractors"],
  ["1799", "Special trade contractors (not elsewhere classified)"],
  ["2741", "Miscellaneous publishing and printing"],
  ["2791", "Typesetting, plate making and related services"],
  ["2842", "Specialty cleaning, polishing and sanitation preparations"],
  ["4011", "Railroads: freight"],
  ["4111", "Local and suburban commuter passenger transportation, including ferries"],
  ["4112", "Passenger railways"],
  ["4119", "Ambulance services"],
  ["4121", "Taxicabs and limousines"],
  ["4131", "Bus lines"],
  ["4214", "Motor freight carriers and trucking, moving and storage, local delivery"],
  ["4215", "Courier services: air and ground, and freight forwarders"],
  ["4225", "Public warehousing and storage"],
  ["4411", "Steamship and cruise lines"],
  ["4457", "Boat rentals and leasing"],
  ["4468", "Marinas, marine service and supplies"],
  ["4511", "Airlines and air carriers (not elsewhere classified)"],
  ["4582", "Airports, flying fields and airport terminals"],
  ["4722", "Travel agencies and tour operators"],
  ["4723", "Package tour operators (Germany only)"],
  ["4784", "Tolls and bridge fees"],
  ["4789", "Transportation services (not elsewhere classified)"],
  ["4812", "Telecommunication equipment and telephone sales"],
  ["4813", "Key-entry telecom merchants: single local and long-distance calls"],
  ["4814", "Telecommunication services: local and long-distance calls, fax"],
  ["4815", "Monthly summary telephone charges"],
  ["4816", "Computer network and information services"],
  ["4821", "Telegraph services"],
  ["4829", "Wire transfers and money orders"],
  ["4899", "Cable, satellite and other pay television and radio services"],
  ["4900", "Utilities: electric, gas, water and sanitary"],
  ["5013", "Motor vehicle supplies and new parts"],
  ["5021", "Office and commercial furniture"],
  ["5039", "Construction materials (not elsewhere classified)"],
  ["5044", "Photographic, photocopy and microfilm equipment and supplies"],
  ["5045", "Computers, computer peripheral equipment and software"],
  ["5046", "Commercial equipment (not elsewhere classified)"],
  ["5047", "Medical, dental, ophthalmic and hospital equipment and supplies"],
  ["5051", "Metal service centers and offices"],
  ["5065", "Electrical parts and equipment"],
  ["5072", "Hardware, equipment and supplies"],
  ["5074", "Plumbing and heating equipment and supplies"],
  ["5085", "Industrial supplies (not elsewhere classified)"],
  ["5094", "Precious stones and metals, watches and jewelry"],
  ["5099", "Durable goods (not elsewhere classified)"],
  ["5111", "Stationery, office supplies, printing and writing paper"],
  ["5122", "Drugs, drug proprietaries and druggist sundries"],
  ["5131", "Piece goods, notions and other dry goods"],
  ["5137", "Uniforms and commercial clothing"],
  ["5139", "Commercial footwear"],
  ["5169", "Chemicals and allied products (not elsewhere classified)"],
  ["5172", "Petroleum and petroleum products"],
  ["5192", "Books, periodicals and newspapers"],
  ["5193", "Florists' supplies, nursery stock and flowers"],
  ["5198", "Paints, varnishes and supplies"],
  ["5199", "Nondurable goods (not elsewhere classified)"],
  ["5200", "Home supply warehouse stores"],
  ["5211", "Lumber and building materials stores"],
  ["5231", "Glass, paint and wallpaper stores"],
  ["5251", "Hardware stores"],
  ["5261", "Nurseries and lawn and garden supply stores"],
  ["5271", "Mobile home dealers"],
  ["5300", "Wholesale clubs"],
  ["5309", "Duty free stores"],
  ["5310", "Discount stores"],
  ["5311", "Department stores"],
  ["5331", "Variety stores"],
  ["5399", "Miscellaneous general merchandise"],
  ["5411", "Grocery stores and supermarkets"],
  ["5422", "Freezer and locker meat provisioners"],
  ["5441", "Candy, nut and confectionery stores"],
  ["5451", "Dairy products stores"],
  ["5462", "Bakeries"],
  ["5499", "Miscellaneous food stores: convenience stores and specialty markets"],
  ["5511", "Car and truck dealers (new and used): sales, service, repairs, parts and leasing"],
  ["5521", "Car and truck dealers (used only): sales, service, repairs, parts and leasing"],
  ["5531", "Auto and home supply stores"],
  ["5532", "Automotive tire stores"],
  ["5533", "Automotive parts and accessories stores"],
  ["5541", "Service stations (with or without ancillary services)"],
  ["5542", "Automated fuel dispensers"],
  ["5551", "Boat dealers"],
  ["5552", "Electric vehicle charging"],
  ["5561", "Camper, recreational and utility trailer dealers"],
  ["5571", "Motorcycle shops and dealers"],
  ["5592", "Motor home dealers"],
  ["5598", "Snowmobile dealers"],
  ["5599", "Miscellaneous automotive, aircraft and farm equipment dealers"],
  ["5611", "Men's and boys' clothing and accessories stores"],
  ["5621", "Women's ready-to-wear stores"],
  ["5631", "Women's accessory and specialty shops"],
  ["5641", "Children's and infants' wear stores"],
  ["5651", "Family clothing stores"],
  ["5655", "Sports and riding apparel stores"],
  ["5661", "Shoe stores"],
  ["5681", "Furriers and fur shops"],
  ["5691", "Men's and women's clothing stores"],
  ["5697", "Tailors, seamstresses, mending and alterations"],
  ["5698", "Wig and toupee stores"],
  ["5699", "Miscellaneous apparel and accessory shops"],
  ["5712", "Furniture, home furnishings and equipment stores, except appliances"],
  ["5713", "Floor covering stores"],
  ["5714", "Drapery, window covering and upholstery stores"],
  ["5715", "Alcoholic beverage wholesalers"],
  ["5718", "Fireplaces, fireplace screens and accessories stores"],
  ["5719", "Miscellaneous home furnishing specialty stores"],
  ["5722", "Household appliance stores"],
  ["5732", "Electronics stores"],
  ["5733", "Music stores: musical instruments, pianos and sheet music"],
  ["5734", "Computer software stores"],
  ["5735", "Record stores"],
  ["5811", "Caterers"],
  ["5812", "Eating places and restaurants"],
  ["5813", "Drinking places (alcoholic beverages): bars, taverns, nightclubs"],
  ["5814", "Fast food restaurants"],
  ["5815", "Digital goods: media (books, movies, music)"],
  ["5816", "Digital goods: games"],
  ["5817", "Digital goods: applications (excluding games)"],
  ["5818", "Digital goods: large digital goods merchant"],
  ["5912", "Drug stores and pharmacies"],
  ["5921", "Package stores: beer, wine and liquor"],
  ["5931", "Used merchandise and secondhand stores"],
  ["5932", "Antique shops: sales, repairs and restoration"],
  ["5933", "Pawn shops"],
  ["5935", "Wrecking and salvage yards"],
  ["5937", "Antique reproductions"],
  ["5940", "Bicycle shops: sales and service"],
  ["5941", "Sporting goods stores"],
  ["5942", "Book stores"],
  ["5943", "Stationery, office and school supply stores"],
  ["5944", "Jewelry, watch, clock and silverware stores"],
  ["5945", "Hobby, toy and game shops"],
  ["5946", "Camera and photographic supply stores"],
  ["5947", "Gift, card, novelty and souvenir shops"],
  ["5948", "Luggage and leather goods stores"],
  ["5949", "Sewing, needlework, fabric and piece goods stores"],
  ["5950", "Glassware and crystal stores"],
  ["5960", "Direct marketing: insurance services"],
  ["5962", "Direct marketing: travel-related arrangement services"],
  ["5963", "Door-to-door sales"],
  ["5964", "Direct marketing: catalog merchants"],
  ["5965", "Direct marketing: combination catalog and retail merchants"],
  ["5966", "Direct marketing: outbound telemarketing merchants"],
  ["5967", "Direct marketing: inbound telemarketing merchants"],
  ["5968", "Direct marketing: continuity and subscription merchants"],
  ["5969", "Direct marketing: other direct marketers (not elsewhere classified)"],
  ["5970", "Artist's supply and craft shops"],
  ["5971", "Art dealers and galleries"],
  ["5972", "Stamp and coin stores"],
  ["5973", "Religious goods stores"],
  ["5975", "Hearing aids: sales, service and supplies"],
  ["5976", "Orthopedic goods and prosthetic devices"],
  ["5977", "Cosmetic stores"],
  ["5978", "Typewriter stores: sales, rentals and service"],
  ["5983", "Fuel dealers: fuel oil, wood, coal and liquefied petroleum"],
  ["5992", "Florists"],
  ["5993", "Cigar stores and stands"],
  ["5994", "News dealers and newsstands"],
  ["5995", "Pet shops, pet foods and supplies"],
  ["5996", "Swimming pools: sales, supplies and services"],
  ["5997", "Electric razor stores: sales and service"],
  ["5998", "Tent and awning shops"],
  ["5999", "Miscellaneous and specialty retail shops"],
  ["6010", "Financial institutions: manual cash disbursements"],
  ["6011", "Financial institutions: automated cash disbursements (ATM)"],
  ["6012", "Financial institutions: merchandise, services and debt repayment"],
  ["6050", "Quasi cash: financial institution"],
  [
    "6051",
    "Non-financial institutions: foreign currency, non-fiat currency (cryptocurrency), money orders, travelers cheques and debt repayment",
  ],
  ["6211", "Security brokers and dealers"],
  ["6300", "Insurance sales, underwriting and premiums"],
  ["6513", "Real estate agents and managers: rentals"],
  ["6529", "Remote stored value load: financial institution"],
  ["6530", "Remote stored value load: merchant"],
  ["6532", "Payment transaction: financial institution"],
  ["6533", "Payment transaction: merchant"],
  ["6534", "Money transfer: financial institution"],
  ["6535", "Value purchase: financial institution"],
  ["6536", "MoneySend intracountry"],
  ["6537", "MoneySend intercountry"],
  ["6538", "MoneySend funding"],
  ["6539", "Funding transaction (excluding MoneySend)"],
  ["6540", "Non-financial institutions: stored value card purchase or load"],
  ["6611", "Overpayments"],
  ["6760", "Savings bonds"],
  ["7011", "Lodging: hotels, motels and resorts"],
  ["7012", "Timeshares"],
  ["7032", "Sporting and recreational camps"],
  ["7033", "Trailer parks and campgrounds"],
  ["7210", "Laundry, cleaning and garment services"],
  ["7211", "Laundries: family and commercial"],
  ["7216", "Dry cleaners"],
  ["7217", "Carpet and upholstery cleaning"],
  ["7221", "Photographic studios"],
  ["7230", "Beauty and barber shops"],
  ["7251", "Shoe repair shops, shoe shine parlors and hat cleaning shops"],
  ["7261", "Funeral services and crematories"],
  ["7273", "Dating services"],
  ["7276", "Tax preparation services"],
  ["7277", "Counseling services: debt, marriage and personal"],
  ["7278", "Buying and shopping services and clubs"],
  ["7296", "Clothing rental: costumes, uniforms and formal wear"],
  ["7297", "Massage parlors"],
  ["7298", "Health and beauty spas"],
  ["7299", "Miscellaneous personal services (not elsewhere classified)"],
  ["7311", "Advertising services"],
  ["7321", "Consumer credit reporting agencies"],
  ["7322", "Debt collection agencies"],
  ["7333", "Commercial photography, art and graphics"],
  ["7338", "Quick copy, reproduction and blueprinting services"],
  ["7339", "Stenographic and secretarial support services"],
  ["7342", "Exterminating and disinfecting services"],
  ["7349", "Cleaning, maintenance and janitorial services"],
  ["7361", "Employment agencies and temporary help services"],
  ["7372", "Computer programming, data processing and integrated systems design services"],
  ["7375", "Information retrieval services"],
  ["7379", "Computer maintenance, repair and services (not elsewhere classified)"],
  ["7392", "Management, consulting and public relations services"],
  ["7393", "Detective agencies, protective agencies and security services"],
  ["7394", "Equipment, tool, furniture and appliance rental and leasing"],
  ["7395", "Photofinishing laboratories and photo developing"],
  ["7399", "Business services (not elsewhere classified)"],
  ["7511", "Truck stops"],
  ["7512", "Automobile rental agencies"],
  ["7513", "Truck and utility trailer rentals"],
  ["7519", "Motor home and recreational vehicle rentals"],
  ["7523", "Parking lots, parking meters and garages"],
  ["7531", "Automotive body repair shops"],
  ["7534", "Tire retreading and repair shops"],
  ["7535", "Automotive paint shops"],
  ["7538", "Automotive service shops (non-dealer)"],
  ["7542", "Car washes"],
  ["7549", "Towing services"],
  ["7622", "Electronics repair shops"],
  ["7623", "Air conditioning and refrigeration repair shops"],
  ["7629", "Electrical and small appliance repair shops"],
  ["7631", "Watch, clock and jewelry repair shops"],
  ["7641", "Furniture: reupholstery, repair and refinishing"],
  ["7692", "Welding services"],
  ["7699", "Miscellaneous repair shops and related services"],
  ["7800", "Government-owned lotteries (US region)"],
  ["7801", "Government-licensed online casinos (online gambling, US region)"],
  ["7802", "Government-licensed horse and dog racing (US region)"],
  ["7829", "Motion picture and video tape production and distribution"],
  ["7832", "Motion picture theaters"],
  ["7841", "DVD and video tape rental stores"],
  ["7911", "Dance halls, studios and schools"],
  ["7922", "Theatrical producers (except motion pictures) and ticket agencies"],
  ["7929", "Bands, orchestras and miscellaneous entertainers"],
  ["7932", "Billiard and pool establishments"],
  ["7933", "Bowling alleys"],
  ["7941", "Commercial and professional sports, athletic fields and sports promoters"],
  ["7991", "Tourist attractions and exhibits"],
  ["7992", "Public golf courses"],
  ["7993", "Video amusement game supplies"],
  ["7994", "Video game arcades and establishments"],
  ["7995", "Betting: lottery tickets, casino gaming chips, off-track betting and wagers at race tracks"],
  ["7996", "Amusement parks, circuses, carnivals and fortune tellers"],
  ["7997", "Membership clubs (sports, recreation, athletic), country clubs and private golf courses"],
  ["7998", "Aquariums, seaquariums, dolphinariums and zoos"],
  ["7999", "Recreation services (not elsewhere classified)"],
  ["8011", "Doctors and physicians (not elsewhere classified)"],
  ["8021", "Dentists and orthodontists"],
  ["8031", "Osteopaths"],
  ["8041", "Chiropractors"],
  ["8042", "Optometrists and ophthalmologists"],
  ["8043", "Opticians, optical goods and eyeglasses"],
  ["8049", "Podiatrists and chiropodists"],
  ["8050", "Nursing and personal care facilities"],
  ["8062", "Hospitals"],
  ["8071", "Medical and dental laboratories"],
  ["8099", "Medical services and health practitioners (not elsewhere classified)"],
  ["8111", "Legal services and attorneys"],
  ["8211", "Elementary and secondary schools"],
  ["8220", "Colleges, universities, professional schools and junior colleges"],
  ["8241", "Correspondence schools"],
  ["8244", "Business and secretarial schools"],
  ["8249", "Vocational and trade schools"],
  ["8299", "Schools and educational services (not elsewhere classified)"],
  ["8351", "Child care services"],
  ["8398", "Charitable and social service organizations"],
  ["8641", "Civic, social and fraternal associations"],
  ["8651", "Political organizations"],
  ["8661", "Religious organizations"],
  ["8675", "Automobile associations"],
  ["8699", "Membership organizations (not elsewhere classified)"],
  ["8734", "Testing laboratories (non-medical)"],
  ["8911", "Architectural, engineering and surveying services"],
  ["8931", "Accounting, auditing and bookkeeping services"],
  ["8999", "Professional services (not elsewhere classified)"],
  ["9211", "Court costs, including alimony and child support"],
  ["9222", "Fines"],
  ["9223", "Bail and bond payments"],
  ["9311", "Tax payments"],
  ["9399", "Government services (not elsewhere classified)"],
  ["9402", "Postal services: government only"],
  ["9405", "Intra-government purchases (government agencies and departments)"],
  ["9406", "Government-owned lotteries (non-US region)"],
  ["9701", "Visa credential server"],
  ["9702", "Emergency services (network use only)"],
  ["9751", "UK supermarkets, electronic hot file"],
  ["9752", "UK petrol stations, electronic hot file"],
  ["9754", "Gambling: horse racing, dog racing, non-sports intrastate internet gambling"],
  ["9950", "Intra-company purchases"],
];

/** Every entry, single codes and ranges, in code order. */
export const mccEntries: readonly MccEntry[] = [
  ...codes.map(([code, description]) => ({ first: code, last: code, description })),
  ...ranges,
].sort((a, b) => a.first.localeCompare(b.first));

const group = (
  key: string,
  description: string,
  members: readonly (string | readonly [string, string])[],
): MccGroup => ({
  key,
  description,
  codes: members.filter((member): member is string => typeof member === "string"),
  ranges: members
    .filter((member): member is readonly [string, string] => typeof member !== "string")
    .map(([first, last]) => ({ first, last })),
});

const airlineCodes = [["3000", "3299"], "4511"] as const;
const carRentalCodes = [["3351", "3441"], "7512", "7513", "7519"] as const;
const lodgingCodes = [["3501", "3999"], "7011"] as const;

/**
 * The groups a spending control may name. Chosen for what a fintech's programs restrict: money
 * that leaves as cash or as something as good as cash, gambling and adult content (which some
 * programs may not fund at all), travel and its parts (corporate cards), and everyday categories
 * (fuel, groceries, restaurants) for benefit and expense cards. A code may be in several groups.
 */
export const mccGroups: readonly MccGroup[] = [
  group("gambling", "Gambling: lotteries, online casinos, betting and racing", [
    "7800",
    "7801",
    "7802",
    "7995",
    "9406",
    "9754",
  ]),
  group("cash", "Cash withdrawals: at a bank teller (manual) and at ATMs", ["6010", "6011"]),
  group(
    "quasi_cash",
    "Quasi cash: purchases as good as cash (wire transfers, money orders, foreign and crypto currency, stored value loads, funding of money transfers)",
    ["4829", "6050", "6051", "6529", "6530", "6534", "6535", "6538", "6539", "6540"],
  ),
  group("airlines", "Airlines and air carriers", airlineCodes),
  group("lodging", "Hotels, motels and resorts", lodgingCodes),
  group("car_rental", "Car, truck and motor home rentals", carRentalCodes),
  group("restaurants", "Restaurants, bars and fast food", ["5812", "5813", "5814"]),
  group(
    "transportation",
    "Passenger transportation: commuter transport, trains, taxis, buses, ferries and cruises, airports, tolls and parking",
    ["4111", "4112", "4121", "4131", "4411", "4582", "4784", "4789", "7523"],
  ),
  group("travel", "Travel: airlines, lodging, car rental, cruises, trains, buses and travel agencies", [
    ...airlineCodes,
    ...lodgingCodes,
    ...carRentalCodes,
    "4112",
    "4131",
    "4411",
    "4582",
    "4722",
    "4723",
    "5962",
    "7012",
    "7033",
  ]),
  group("digital_goods", "Digital goods: media, games, applications and large digital merchants", [
    ["5815", "5818"],
  ]),
  group("adult", "Adult content and services: inbound telemarketing, dating services, massage parlors", [
    "5967",
    "7273",
    "7297",
  ]),
  group(
    "crypto",
    "Cryptocurrency purchases (6051, which also covers foreign currency, money orders and travelers cheques)",
    ["6051"],
  ),
  group("government", "Government: courts, fines, bail, taxes, postal and other government services", [
    ["9211", "9405"],
  ]),
  group("utilities", "Utilities and telecommunication services: electricity, gas, water, phone and pay TV", [
    "4814",
    "4815",
    "4899",
    "4900",
  ]),
  group("fuel", "Fuel: service stations, automated fuel dispensers, fuel dealers and EV charging", [
    "5541",
    "5542",
    "5552",
    "5983",
  ]),
  group("groceries", "Groceries: supermarkets, convenience stores, bakeries and food stores", [
    "5411",
    "5422",
    "5441",
    "5451",
    "5462",
    "5499",
  ]),
  group("alcohol_tobacco", "Alcohol and tobacco: liquor stores, bars, cigar stores", [
    "5813",
    "5921",
    "5993",
  ]),
  group("direct_marketing", "Direct marketing and telemarketing merchants", [["5960", "5969"]]),
  group("healthcare", "Health care: doctors, dentists, hospitals, pharmacies and medical services", [
    ["8011", "8099"],
    "5912",
    "5975",
    "5976",
  ]),
  group("education", "Education: schools, colleges, universities and training", [["8211", "8299"]]),
];

// Precomputed for the authorization path: one bit mask per code (a bit per group) and each
// code's entry, so a lookup is an array read. Thirty-two groups fit a Uint32Array.
const codeCount = 10_000;
const groupBits = new Map(mccGroups.map((g, index) => [g.key, 1 << index]));
const groupMasks = new Uint32Array(codeCount);
const entryOf: (MccEntry | undefined)[] = new Array(codeCount).fill(undefined);

if (mccGroups.length > 32) throw new Error("more MCC groups than bits in a mask");
for (const entry of mccEntries) {
  for (let code = Number(entry.first); code <= Number(entry.last); code++) entryOf[code] = entry;
}
for (const [index, g] of mccGroups.entries()) {
  const spans = [...g.codes.map((code) => ({ first: code, last: code })), ...g.ranges];
  for (const span of spans) {
    for (let code = Number(span.first); code <= Number(span.last); code++)
      groupMasks[code] = (groupMasks[code] ?? 0) | (1 << index);
  }
}
const groupsByMask = new Map<number, readonly string[]>();

/** The code as an index 0-9999, or -1 when it is not exactly four ASCII digits. */
function indexOf(code: string): number {
  if (code.length !== 4) return -1;
  let value = 0;
  for (let i = 0; i < 4; i++) {
    const digit = code.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) return -1;
    value = value * 10 + digit;
  }
  return value;
}

/** The keys of every group, in catalog order. */
export const mccGroupKeys: readonly string[] = mccGroups.map((g) => g.key);

export function isMccGroupKey(key: string): boolean {
  return groupBits.has(key);
}

/** The code's description (a brand-specific code: its range's), or null for an unknown code. */
export function mccDescription(code: string): string | null {
  const index = indexOf(code);
  return index < 0 ? null : (entryOf[index]?.description ?? null);
}

export function isKnownMcc(code: string): boolean {
  const index = indexOf(code);
  return index >= 0 && entryOf[index] !== undefined;
}

/**
 * Whether the code is in the group: false for an unknown group or a code that is not four digits.
 * A group's range counts every code in it, known to the catalog or not (9300 is government).
 */
export function mccInGroup(code: string, groupKey: string): boolean {
  const bit = groupBits.get(groupKey);
  const index = indexOf(code);
  if (bit === undefined || index < 0) return false;
  return ((groupMasks[index] ?? 0) & bit) !== 0;
}

/** The keys of the groups the code is in, in catalog order (the same array for equal masks). */
export function groupsOfMcc(code: string): readonly string[] {
  const index = indexOf(code);
  const mask = index < 0 ? 0 : (groupMasks[index] ?? 0);
  let keys = groupsByMask.get(mask);
  if (!keys) {
    keys = Object.freeze(mccGroups.filter((_, i) => (mask & (1 << i)) !== 0).map((g) => g.key));
    groupsByMask.set(mask, keys);
  }
  return keys;
}
