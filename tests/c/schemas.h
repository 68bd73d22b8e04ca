/* Schemas real tools have, shared by test_schema.c and test_tools.c. */
#ifndef TEST_SCHEMAS_H
#define TEST_SCHEMAS_H

/* Order.model_json_schema() from pydantic 2.13, for this model:
 *   class Item(BaseModel):
 *       sku: str = Field(pattern=r'^[A-Z]{3}-\d{4}$', description='Stock keeping unit')
 *       qty: int = Field(ge=1, le=100)
 *       note: Optional[str] = None
 *   class Cat(BaseModel): kind: Literal['cat']; lives: int = 9
 *   class Dog(BaseModel): kind: Literal['dog']; good: bool = True
 *   class Order(BaseModel):
 *       customer: str = Field(min_length=1, max_length=8)
 *       priority: Literal['low', 'high'] = 'low'
 *       channel: Literal['web'] = 'web'
 *       items: list[Item] = Field(min_length=1)
 *       discount: Optional[float] = Field(default=None, ge=0, lt=1)
 *       tags: set[str] = set()
 *       where: tuple[float, float] = (0.0, 0.0)
 *       pet: Optional[Union[Cat, Dog]] = Field(default=None, discriminator='kind')
 *       parent: Optional['Order'] = None
 *       extra: dict[str, int] = {}
 * Nested models through $defs, Optional as anyOf with null, Literal as enum and const, a
 * discriminated union (oneOf), a recursive $ref at the root, set as uniqueItems, tuple as
 * prefixItems. */
static const char pydantic_order_schema[] =
	"{\"$defs\": {\"Cat\": {\"properties\": {\"kind\": {\"const\": \"cat\", \"title\": "
	"\"Kind\", \"type\": \"string\"}, \"lives\": {\"default\": 9, \"title\": \"Lives\", "
	"\"type\": \"integer\"}}, \"required\": [\"kind\"], \"title\": \"Cat\", \"type\": "
	"\"object\"}, \"Dog\": {\"properties\": {\"kind\": {\"const\": \"dog\", \"title\": "
	"\"Kind\", \"type\": \"string\"}, \"good\": {\"default\": true, \"title\": \"Good\", "
	"\"type\": \"boolean\"}}, \"required\": [\"kind\"], \"title\": \"Dog\", \"type\": "
	"\"object\"}, \"Item\": {\"properties\": {\"sku\": {\"description\": \"Stock keeping "
	"unit\", \"pattern\": \"^[A-Z]{3}-\\\\d{4}$\", \"title\": \"Sku\", \"type\": "
	"\"string\"}, \"qty\": {\"maximum\": 100, \"minimum\": 1, \"title\": \"Qty\", "
	"\"type\": \"integer\"}, \"note\": {\"anyOf\": [{\"type\": \"string\"}, {\"type\": "
	"\"null\"}], \"default\": null, \"title\": \"Note\"}}, \"required\": [\"sku\", "
	"\"qty\"], \"title\": \"Item\", \"type\": \"object\"}, \"Order\": {\"properties\": "
	"{\"customer\": {\"maxLength\": 8, \"minLength\": 1, \"title\": \"Customer\", "
	"\"type\": \"string\"}, \"priority\": {\"default\": \"low\", \"enum\": [\"low\", "
	"\"high\"], \"title\": \"Priority\", \"type\": \"string\"}, \"channel\": {\"const\": "
	"\"web\", \"default\": \"web\", \"title\": \"Channel\", \"type\": \"string\"}, "
	"\"items\": {\"items\": {\"$ref\": \"#/$defs/Item\"}, \"minItems\": 1, \"title\": "
	"\"Items\", \"type\": \"array\"}, \"discount\": {\"anyOf\": [{\"exclusiveMaximum\": 1, "
	"\"minimum\": 0, \"type\": \"number\"}, {\"type\": \"null\"}], \"default\": null, "
	"\"title\": \"Discount\"}, \"tags\": {\"default\": [], \"items\": {\"type\": "
	"\"string\"}, \"title\": \"Tags\", \"type\": \"array\", \"uniqueItems\": true}, "
	"\"where\": {\"default\": [0.0, 0.0], \"maxItems\": 2, \"minItems\": 2, "
	"\"prefixItems\": [{\"type\": \"number\"}, {\"type\": \"number\"}], \"title\": "
	"\"Where\", \"type\": \"array\"}, \"pet\": {\"anyOf\": [{\"discriminator\": "
	"{\"mapping\": {\"cat\": \"#/$defs/Cat\", \"dog\": \"#/$defs/Dog\"}, \"propertyName\": "
	"\"kind\"}, \"oneOf\": [{\"$ref\": \"#/$defs/Cat\"}, {\"$ref\": \"#/$defs/Dog\"}]}, "
	"{\"type\": \"null\"}], \"default\": null, \"title\": \"Pet\"}, \"parent\": "
	"{\"anyOf\": [{\"$ref\": \"#/$defs/Order\"}, {\"type\": \"null\"}], \"default\": "
	"null}, \"extra\": {\"additionalProperties\": {\"type\": \"integer\"}, \"default\": "
	"{}, \"title\": \"Extra\", \"type\": \"object\"}}, \"required\": [\"customer\", "
	"\"items\"], \"title\": \"Order\", \"type\": \"object\"}}, \"$ref\": "
	"\"#/$defs/Order\"}";

#endif
